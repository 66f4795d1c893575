"""Webhooks in: `POST /hooks/{name}` on `ratchet serve` starts a run, sends a session a message or
decides a pending call, for the hooks a file declares (RATCHET_HOOKS, JSON or TOML by suffix):

    {"hooks": {
        "issues": {"secret": "${ISSUES_HOOK_SECRET}",
                   "run": {"agent": "coder", "objective": "triage issue #{issue.number}: {issue.title}",
                           "workspace": "repo"}},
        "chat":   {"secret": "${CHAT_HOOK_SECRET}", "message": {"session_id": "{channel}", "text": "{text}"}},
        "review": {"secret": "${REVIEW_HOOK_SECRET}", "max_age_s": 300,
                   "decision": {"workflow_id": "{run}", "call_id": "{call}", "decision": "{verdict}"}}
    }}

A request is taken only with the signature of the GitHub convention: `X-Hub-Signature-256:
sha256=<hex HMAC-SHA256 of the raw body under the hook's secret>`, compared in constant time. A hook
with `max_age_s` also wants `X-Ratchet-Timestamp` (Unix seconds, within that many seconds of now)
and signs `{timestamp}.{body}` instead, so a captured request cannot be replayed later. Every
delivery carries its id (`X-GitHub-Delivery`, or the hook's `delivery_header`): a run's workflow
id is `hook-{name}-{delivery id}`, a message's id is the delivery id, so the same delivery sent
twice starts one run or sends one message (the answer says `duplicate`).

A template's `{a.b}` is the body's field `a.b`: a string that is only `{a.b}` takes the field's
value as it is (a number stays a number), one with other text around it takes it as text; `{{` and
`}}` are braces. A field the body lacks is a 400 naming it, and nothing is started. The secret is
an environment variable's value (`${NAME}`): the file holds only its name.

Only pydantic, the standard library and the contracts are imported here; `ratchet/serve/app.py`
routes the request and does what the hook says through `ratchet.client`.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import re
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, ValidationError, model_validator

from ratchet.contracts import NAME_PATTERN, Strict, problems

SIGNATURE_HEADER = "X-Hub-Signature-256"
TIMESTAMP_HEADER = "X-Ratchet-Timestamp"
_FIELD = re.compile(r"\{\{|\}\}|\{([A-Za-z0-9_.-]+)\}")
_SECRET = re.compile(r"^\$\{([A-Za-z_][A-Za-z0-9_]*)\}$")


class HookError(Exception):
    """A delivery refused: `status` is the HTTP status to answer (nothing was started)."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status, self.reason = status, reason


class MessageTemplate(Strict):
    session_id: str
    text: str


class DecisionTemplate(Strict):
    workflow_id: str
    call_id: str
    decision: str
    """`approve` or `reject` once rendered."""
    reason: str = "rejected by a webhook"


class Hook(Strict):
    secret: str = Field(description="`${ENV_VAR}`: the variable holding the HMAC secret.")
    delivery_header: str = "X-GitHub-Delivery"
    max_age_s: float | None = Field(None, gt=0)
    run: dict[str, Any] | None = None
    """An `AgentRun` template."""
    message: MessageTemplate | None = None
    decision: DecisionTemplate | None = None

    @model_validator(mode="after")
    def _one_action(self) -> Hook:
        if sum(x is not None for x in (self.run, self.message, self.decision)) != 1:
            raise ValueError("give exactly one of run, message or decision")
        if not _SECRET.match(self.secret):
            raise ValueError("secret: must name an environment variable, as ${NAME} (the file holds no secret)")
        return self

    @property
    def action(self) -> Literal["run", "message", "decision"]:
        return "run" if self.run is not None else "message" if self.message is not None else "decision"

    def secret_value(self, environ: Mapping[str, str] = os.environ) -> bytes:
        name = _SECRET.match(self.secret)
        assert name is not None
        value = environ.get(name.group(1), "")
        if not value:
            raise HookError(503, f"the hook's secret variable {name.group(1)} is not set on this server")
        return value.encode()


class HookFile(Strict):
    hooks: dict[str, Hook]

    @model_validator(mode="after")
    def _names(self) -> HookFile:
        bad = [n for n in self.hooks if not re.match(NAME_PATTERN, n)]
        if bad:
            raise ValueError(f"hook names must match {NAME_PATTERN}: {bad}")
        return self


def load_hooks(path: Path) -> dict[str, Hook]:
    """The hooks of the file `path`; ValueError naming the file and field when it is wrong."""
    try:
        text = path.read_text()
        raw = tomllib.loads(text) if path.suffix == ".toml" else json.loads(text)
        return HookFile.model_validate(raw).hooks
    except (OSError, ValueError) as exc:
        detail = "; ".join(problems(exc, "hooks")) if isinstance(exc, ValidationError) else str(exc)
        raise ValueError(f"RATCHET_HOOKS={path}: {detail}") from None


def verify(
    hook: Hook, body: bytes, headers: Mapping[str, str], now: float, environ: Mapping[str, str] = os.environ
) -> str:
    """The delivery id of a request whose signature (and timestamp) hold; HookError otherwise."""
    given = headers.get(SIGNATURE_HEADER.lower()) or headers.get(SIGNATURE_HEADER) or ""
    signed = body
    if hook.max_age_s is not None:
        stamp = headers.get(TIMESTAMP_HEADER.lower()) or headers.get(TIMESTAMP_HEADER) or ""
        try:
            age = abs(now - float(stamp))
        except ValueError:
            raise HookError(401, f"{TIMESTAMP_HEADER} (Unix seconds) is required by this hook") from None
        if age > hook.max_age_s:
            raise HookError(401, f"{TIMESTAMP_HEADER} is {age:.0f} s from now; this hook takes {hook.max_age_s:g} s")
        signed = stamp.encode() + b"." + body
    expected = "sha256=" + hmac.new(hook.secret_value(environ), signed, hashlib.sha256).hexdigest()
    if not given or not hmac.compare_digest(given.encode(), expected.encode()):
        raise HookError(401, f"{SIGNATURE_HEADER} is missing or does not match the body")
    delivery = headers.get(hook.delivery_header.lower()) or headers.get(hook.delivery_header) or ""
    if not re.fullmatch(r"[A-Za-z0-9_.:-]{1,128}", delivery):
        raise HookError(400, f"{hook.delivery_header}: a delivery id (letters, digits, _.:-, at most 128) is required")
    return delivery


def render(template: Any, body: Any, where: str = "") -> Any:
    """`template` with every `{field}` replaced from `body` (module docstring); HookError(400) for
    a field the body lacks, naming the template's place and the field."""
    if isinstance(template, dict):
        return {k: render(v, body, f"{where}.{k}" if where else k) for k, v in template.items()}
    if isinstance(template, list):
        return [render(v, body, f"{where}[{i}]") for i, v in enumerate(template)]
    if not isinstance(template, str):
        return template
    whole = _FIELD.fullmatch(template)
    if whole and whole.group(1):
        return _field(body, whole.group(1), where)

    def one(match: re.Match[str]) -> str:
        if match.group(1) is None:
            return match.group(0)[0]
        value = _field(body, match.group(1), where)
        return value if isinstance(value, str) else json.dumps(value)

    return _FIELD.sub(one, template)


def _field(body: Any, path: str, where: str) -> Any:
    value = body
    for part in path.split("."):
        if isinstance(value, dict) and part in value:
            value = value[part]
        elif isinstance(value, list) and part.isdigit() and int(part) < len(value):
            value = value[int(part)]
        else:
            raise HookError(400, f"{where}: the body has no field {path!r}")
    return value


def run_id(name: str, delivery: str) -> str:
    return f"hook-{name}-{delivery}"
