"""Which Anthropic API errors Temporal retries (the anthropic provider's counterpart of
openai_errors.py).

429 (rate limit), 529 (overloaded), 408, 409, other 5xx, an `error` event in a stream (its
status is the stream's 200), timeouts and dropped connections are transient: retried with backoff,
honouring `retry-after`. 400, 401, 403, 404, 413 and 422 will
recur on every attempt: they fail non-retryably with a message a person can act on.
"""

from __future__ import annotations

import anthropic
import httpx2
from temporalio.exceptions import ApplicationError

from ratchet.models.openai_errors import retry_after

_HINTS = {
    400: "the API rejected the request (bad model settings or messages)",
    401: "the API key was rejected; check ANTHROPIC_API_KEY (or ANTHROPIC_AUTH_TOKEN) on the worker",
    403: "the API key may not use this model or endpoint",
    404: "no such model or endpoint; check the model (ANTHROPIC_MODEL, the profile or the run) and ANTHROPIC_BASE_URL",
    413: "the request is larger than the API accepts (shorten the context: the profile's context_messages)",
    422: "the API could not process the request",
}
_RETRYABLE_STATUS = {408, 409, 429}


def classify(exc: Exception) -> ApplicationError:
    """Map an anthropic SDK exception to a Temporal error, retryable or not on purpose."""
    if isinstance(exc, anthropic.APITimeoutError):
        return ApplicationError(f"model call timed out: {exc}", type="ModelTimeout")
    if isinstance(exc, anthropic.APIConnectionError):
        return ApplicationError(f"Anthropic API unreachable: {exc}", type="ModelUnavailable")
    if isinstance(exc, anthropic.APIStatusError):
        return _from_status(exc)
    if isinstance(exc, httpx2.HTTPError):  # the connection failed while a stream was read
        return ApplicationError(f"Anthropic API stream failed: {type(exc).__name__}: {exc}", type="ModelUnavailable")
    if isinstance(exc, anthropic.APIResponseValidationError):
        return ApplicationError(f"the Anthropic API sent an unreadable reply: {exc}", type="ModelBadReply")
    return ApplicationError(f"model call failed: {type(exc).__name__}: {exc}", type="ModelError")


def _from_status(exc: anthropic.APIStatusError) -> ApplicationError:
    status = exc.status_code
    kind, detail = _detail(exc)
    said = f"{kind}: {detail}" if kind else detail
    if status < 400:  # an `error` event in a stream that began well (overloaded, api_error)
        return ApplicationError(f"the Anthropic API's stream failed: {said}", type="ModelStreamError")
    if status in _RETRYABLE_STATUS or status >= 500:
        word = "overloaded" if status == 529 else "answered"
        return ApplicationError(
            f"the Anthropic API {word} {status}: {said}",
            type=f"ModelHTTP{status}",
            next_retry_delay=retry_after(exc.response.headers),
        )
    hint = _HINTS.get(status, "the API refused the request")
    return ApplicationError(
        f"the Anthropic API answered {status}: {hint}. It said: {said}",
        type=f"ModelHTTP{status}",
        non_retryable=True,
    )


def _detail(exc: anthropic.APIStatusError) -> tuple[str, str]:
    """The error's type and message from the API's body `{"type": "error", "error": {...}}`."""
    body = exc.body
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and inner.get("message"):
            return str(inner.get("type") or ""), str(inner["message"])[:500]
    return "", str(exc.message)[:500]
