"""Keep the worker's credentials out of history even when an endpoint or a tool quotes them.

Credentials reach the worker only through its environment (settings) and never travel in workflow
input. Two ways remain for one to end up in a payload: an error message that quotes it (an
OpenAI-compatible endpoint answering 401 with "Incorrect API key provided: sk-...", which the model
activity passes on as "Endpoint said: ..."), and a tool that prints it. This activity interceptor
replaces every configured secret value with `[REDACTED]` in failure messages (and the messages of
their causes) and in a tool result's inline `output`, before anything is serialized.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Any
from urllib.parse import urlsplit

from temporalio.exceptions import ApplicationError
from temporalio.worker import ActivityInboundInterceptor, ExecuteActivityInput, Interceptor

from ratchet.ops.settings import Settings

MASK = "[REDACTED]"
MIN_SECRET_CHARS = 8
"""Shorter values are not redacted: replacing them would mangle ordinary text."""


def secret_values(settings: Settings) -> list[str]:
    """The credential strings this worker holds: API keys, codec keys (whole and each key), the
    ledger database's password and the object store's secret key."""
    values = [s.get_secret_value() for s in (settings.openai_api_key, settings.temporal_api_key) if s]
    password = urlsplit(settings.ledger_store_url).password if "://" in settings.ledger_store_url else None
    values += [v for v in (password, os.environ.get("AWS_SECRET_ACCESS_KEY"), os.environ.get("AWS_SESSION_TOKEN")) if v]
    if settings.codec_keys is not None:
        spec = settings.codec_keys.get_secret_value()
        values += [spec] + [entry.partition(":")[2].strip() for entry in spec.split(",")]
    return sorted({v for v in values if len(v) >= MIN_SECRET_CHARS}, key=len, reverse=True)


def redact(text: str, secrets: Iterable[str]) -> str:
    for secret in secrets:
        if secret in text:
            text = text.replace(secret, MASK)
    return text


class RedactSecretsInterceptor(Interceptor):
    def __init__(self, secrets: Iterable[str]) -> None:
        self.secrets = list(secrets)

    def intercept_activity(self, next: ActivityInboundInterceptor) -> ActivityInboundInterceptor:
        return _RedactingActivityInbound(next, self.secrets)


class _RedactingActivityInbound(ActivityInboundInterceptor):
    def __init__(self, next: ActivityInboundInterceptor, secrets: list[str]) -> None:
        super().__init__(next)
        self.secrets = secrets

    async def execute_activity(self, input: ExecuteActivityInput) -> Any:
        try:
            result = await self.next.execute_activity(input)
        except Exception as exc:
            clean = redacted_error(exc, self.secrets)
            if clean is exc:
                raise
            raise clean from None
        output = getattr(result, "output", None)
        if isinstance(output, str) and hasattr(result, "model_copy") and any(s in output for s in self.secrets):
            result = result.model_copy(update={"output": redact(output, self.secrets)})
        return result


def redacted_error(exc: BaseException, secrets: list[str]) -> BaseException:
    """`exc` itself when no message in its chain holds a secret; else an ApplicationError with the
    same type name and retry behaviour, the chain's messages redacted, and no payload details."""
    chain = _chain(exc)
    if not any(s in str(e) for e in chain for s in secrets):
        return exc
    top = exc.message if isinstance(exc, ApplicationError) else str(exc)
    message = redact(top, secrets) + "".join(
        f" (caused by {type(cause).__name__}: {redact(str(cause), secrets)})" for cause in chain[1:]
    )
    if isinstance(exc, ApplicationError):
        return ApplicationError(
            message,
            type=exc.type,
            non_retryable=exc.non_retryable,
            next_retry_delay=exc.next_retry_delay,
            category=exc.category,
        )
    return ApplicationError(message, type=type(exc).__name__)


def _chain(exc: BaseException) -> list[BaseException]:
    chain, seen = [], set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        chain.append(current)
        current = current.__cause__ or (None if current.__suppress_context__ else current.__context__)
    return chain
