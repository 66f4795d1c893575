"""One place that decides which model-endpoint errors Temporal retries.

429, 408, 409, 5xx, timeouts, dropped connections and unparseable bodies are transient: retried
with backoff, honouring Retry-After. 400/401/403/404/422, and a 5xx whose message says the
request's content could not be parsed (llama.cpp's answer to bad historical tool arguments), will
recur on every attempt: they fail non-retryably with a message a person can act on.
"""

from __future__ import annotations

import email.utils
import time
from datetime import timedelta

from typing import TYPE_CHECKING

from temporalio.exceptions import ApplicationError

_HINTS = {
    400: "the endpoint rejected the request (bad model settings or messages)",
    401: "the API key was rejected; check OPENAI_API_KEY on the worker",
    403: "the API key may not use this model or endpoint",
    404: "no such model or endpoint; check the model (OPENAI_MODEL, the profile or the run) and OPENAI_BASE_URL",
    422: "the endpoint could not process the request",
}
_RETRYABLE_STATUS = {408, 409, 429}
MAX_RETRY_AFTER = timedelta(minutes=10)

if TYPE_CHECKING:
    import openai


def classify(exc: Exception) -> ApplicationError:
    """Map an openai client exception to a Temporal error, retryable or not on purpose."""
    import openai  # here, not at import: anthropic's provider uses this module's retry_after

    if isinstance(exc, openai.APITimeoutError):
        return ApplicationError(f"model call timed out: {exc}", type="ModelTimeout")
    if isinstance(exc, openai.APIConnectionError):  # also a stream cut mid-way
        return ApplicationError(f"model endpoint unreachable: {exc}", type="ModelUnavailable")
    if isinstance(exc, openai.APIStatusError):
        return _from_status(exc)
    if isinstance(exc, (openai.APIResponseValidationError, ValueError)):
        return ApplicationError(f"model endpoint sent an unreadable reply: {exc}", type="ModelBadReply")
    return ApplicationError(f"model call failed: {type(exc).__name__}: {exc}", type="ModelError")


def _from_status(exc: openai.APIStatusError) -> ApplicationError:
    status = exc.status_code
    detail = _detail(exc)
    if status >= 500 and _names_request_content(detail):
        return ApplicationError(
            f"model endpoint answered {status}: it cannot parse the request's content, and a retry would "
            f"send the same content. Endpoint said: {detail}",
            type=f"ModelHTTP{status}",
            non_retryable=True,
        )
    if status in _RETRYABLE_STATUS or status >= 500:
        return ApplicationError(
            f"model endpoint answered {status}: {detail}",
            type=f"ModelHTTP{status}",
            next_retry_delay=retry_after(exc.response.headers),
        )
    hint = _HINTS.get(status, "the endpoint refused the request")
    return ApplicationError(
        f"model endpoint answered {status}: {hint}. Endpoint said: {detail}",
        type=f"ModelHTTP{status}",
        non_retryable=True,
    )


_REQUEST_CONTENT_ERRORS = ("failed to parse", "parse_error", "parse error", "invalid json", "invalid request")
"""Words with which servers that answer 5xx for a bad request (llama.cpp: "Failed to parse tool
call arguments as JSON: [json.exception.parse_error.101] ...") say the content is at fault."""


def _names_request_content(detail: str) -> bool:
    lowered = detail.lower()
    return any(words in lowered for words in _REQUEST_CONTENT_ERRORS)


def _detail(exc: openai.APIStatusError) -> str:
    body = exc.body
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and inner.get("message"):
            return str(inner["message"])[:500]
    return str(exc.message)[:500]


def retry_after(headers) -> timedelta | None:
    """Retry-After (seconds or HTTP date) or retry-after-ms, capped at MAX_RETRY_AFTER."""
    if headers is None:
        return None
    millis = headers.get("retry-after-ms")
    if millis:
        try:
            return min(timedelta(milliseconds=float(millis)), MAX_RETRY_AFTER)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        seconds = float(value)
    except ValueError:
        parsed = email.utils.parsedate_to_datetime(value) if value else None
        if parsed is None:
            return None
        seconds = parsed.timestamp() - time.time()
    return min(timedelta(seconds=max(seconds, 0.0)), MAX_RETRY_AFTER)
