"""`notify.send`: one webhook delivery (ratchet/contracts/notify.py), a POST of the event as JSON.

Headers: `Idempotency-Key` (the same on every attempt: a receiver that stores it takes the event
once, even when our attempt died after it answered), `X-Ratchet-Event`, and with a secret
`X-Hub-Signature-256: sha256=<HMAC-SHA256 of the body>` (the convention `ratchet serve`'s own
hooks check). A 2xx is done; a 4xx other than 408 and 429 is the receiver's refusal for good (not
retried: the `RatchetNotify` workflow fails, showing the answer); anything else, or no answer, is
retried by the activity's policy. `${NAME}` in the URL and the secret is the worker's variable NAME,
read now; errors name the URL as the profile wrote it, never with a variable's value.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING

from temporalio import activity
from temporalio.exceptions import ApplicationError

from ratchet.contracts import ErrorType, NotifyDelivery
from ratchet.contracts.activities import NOTIFY_SEND

if TYPE_CHECKING:  # imported at the first delivery: a worker that notifies nobody does not hold it
    import httpx2

_VARIABLE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
TIMEOUT_S = 25.0


class NotifyActivities:
    def __init__(self, environ: Mapping[str, str] = os.environ) -> None:
        self.environ = environ
        self._http: httpx2.AsyncClient | None = None

    @activity.defn(name=NOTIFY_SEND.name)
    async def send(self, delivery: NotifyDelivery) -> str:
        shown = delivery.url.split("?")[0]
        url = self._expanded(delivery.url, "url")
        body = delivery.body.model_dump_json().encode()
        headers = {
            "Content-Type": "application/json",
            "Idempotency-Key": delivery.key,
            "X-Ratchet-Event": delivery.body.event,
            "User-Agent": "ratchet-notify",
        }
        if delivery.secret is not None:
            secret = self._expanded(delivery.secret, "secret").encode()
            headers["X-Hub-Signature-256"] = "sha256=" + hmac.new(secret, body, hashlib.sha256).hexdigest()
        import httpx2

        if self._http is None:
            self._http = httpx2.AsyncClient(timeout=TIMEOUT_S)
        try:
            answer = await self._http.post(url, content=body, headers=headers)
        except httpx2.HTTPError as exc:
            raise ApplicationError(f"{delivery.body.event} to {shown}: no answer ({type(exc).__name__})") from None
        if 200 <= answer.status_code < 300:
            return f"{delivery.body.event} to {shown}: {answer.status_code}"
        said = f"{delivery.body.event} to {shown}: {answer.status_code} {answer.text[:200]!r}"
        if 400 <= answer.status_code < 500 and answer.status_code not in (408, 429):
            raise ApplicationError(
                f"{said} (refused: not sent again)", type=ErrorType.INVALID_INPUT, non_retryable=True
            )
        raise ApplicationError(said)

    def _expanded(self, text: str, what: str) -> str:
        def value(match: re.Match[str]) -> str:
            found = self.environ.get(match.group(1))
            if not found:
                raise ApplicationError(
                    f"notify {what}: the worker has no variable {match.group(1)}",
                    type=ErrorType.INVALID_INPUT,
                    non_retryable=True,
                )
            return found

        return _VARIABLE.sub(value, text)
