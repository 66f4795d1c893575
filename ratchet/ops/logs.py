"""Worker logging: plain text or one JSON object per line (RATCHET_LOG_FORMAT=json).

A JSON line carries, besides time, level, logger and message, the context of the activity that
logged it: workflow id, run id, activity type and id, attempt, and from the activity's input the
agent step, the tool call id and the idempotency key. An activity interceptor puts that context in
a contextvar for the activity's duration, so any logger called from a tool (not only
`activity.logger`) gets it, and logs one `activity completed` / `activity failed` line per
execution. Workflow code logs through `workflow.logger`, whose records carry the workflow's ids.

Every record is redacted before it is written (`RedactingFilter`): a library may log a request, a
response or an exception that quotes a secret, in any form ratchet/ops/redaction.py recognises.
"""

from __future__ import annotations

import asyncio
import contextvars
import json
import logging
import sys
import time
from datetime import UTC, datetime
from typing import Any

from temporalio import activity
from temporalio.exceptions import ApplicationError, ApplicationErrorCategory
from temporalio.worker import ActivityInboundInterceptor, ExecuteActivityInput, Interceptor

from ratchet.core import keys
from ratchet.ops.redaction import Redactor
from ratchet.ops.secrets import secret_values
from ratchet.ops.settings import Settings

log = logging.getLogger("ratchet.activity")
_context: contextvars.ContextVar[dict[str, Any] | None] = contextvars.ContextVar("ratchet_log_context", default=None)
_INPUT_FIELDS = ("step", "call_id", "key")
_TEMPORAL_FIELDS = {
    "workflow_id": "workflow_id",
    "run_id": "run_id",
    "workflow_type": "workflow_type",
    "activity_type": "activity_type",
    "activity_id": "activity_id",
    "attempt": "attempt",
    "task_queue": "task_queue",
    "namespace": "namespace",
    "update_id": "update_id",
    "update_name": "update_name",
}


class JsonFormatter(logging.Formatter):
    """One JSON object per record: ts, level, logger, message, the activity or workflow context,
    any `extra={"ratchet": {...}}` fields, and `exc` with the traceback."""

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        for attr in ("temporal_workflow", "temporal_activity"):
            details = getattr(record, attr, None)
            if isinstance(details, dict):
                out.update({_TEMPORAL_FIELDS[k]: v for k, v in details.items() if k in _TEMPORAL_FIELDS})
        out.update(_context.get() or {})
        extra = getattr(record, "ratchet", None)
        if isinstance(extra, dict):
            out.update(extra)
        if record.exc_info:
            out["exc"] = record.exc_text or self.formatException(record.exc_info)
        return json.dumps(out, default=str, ensure_ascii=False)


class RedactingFilter(logging.Filter):
    """A handler filter: the record's message, traceback and stack with secrets masked. The message
    is formatted here (its arguments may quote a secret), the traceback kept as `exc_text`."""

    def __init__(self, redactor: Redactor) -> None:
        super().__init__()
        self.redactor = redactor

    def filter(self, record: logging.LogRecord) -> bool:
        if not self.redactor:
            return True
        try:
            message = record.getMessage()
        except Exception:  # bad arguments: logging reports them when it formats the record
            return True
        record.msg, record.args = self.redactor.redact(message), None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = self.redactor.redact(record.exc_text)
        if record.stack_info:
            record.stack_info = self.redactor.redact(record.stack_info)
        return True


def configure_logging(settings: Settings) -> None:
    """Root logging for a worker process, to stderr, in RATCHET_LOG_FORMAT at RATCHET_LOG_LEVEL."""
    handler = logging.StreamHandler(sys.stderr)
    handler.addFilter(RedactingFilter(Redactor(secret_values(settings))))
    if settings.log_format == "json":
        handler.setFormatter(JsonFormatter())
        _ids_in_fields_not_messages()
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(settings.log_level)


def _ids_in_fields_not_messages() -> None:
    """temporalio appends its ids to the message text by default; JSON has them as fields."""
    import temporalio.workflow

    activity.logger.activity_info_on_message = False
    temporalio.workflow.logger.workflow_info_on_message = False


class LogContextInterceptor(Interceptor):
    """Worker interceptor: activity context for log records, and one line per activity execution."""

    def intercept_activity(self, next: ActivityInboundInterceptor) -> ActivityInboundInterceptor:
        return _LogContextActivityInbound(next)


class _LogContextActivityInbound(ActivityInboundInterceptor):
    async def execute_activity(self, input: ExecuteActivityInput) -> Any:
        fields = _fields(input)
        token = _context.set(fields)
        started = time.monotonic()
        try:
            result = await self.next.execute_activity(input)
        except (Exception, asyncio.CancelledError) as exc:
            took = round(time.monotonic() - started, 3)
            benign = isinstance(exc, ApplicationError) and exc.category == ApplicationErrorCategory.BENIGN
            log.log(
                logging.DEBUG if benign else logging.WARNING,  # e.g. NotOnThisHost: an expected answer
                "%s failed after %.3fs: %s: %s",
                fields["activity_type"],
                took,
                type(exc).__name__,
                exc,
                extra={"ratchet": {"outcome": "failed", "duration_s": took, "error_type": type(exc).__name__}},
            )
            raise
        else:
            took = round(time.monotonic() - started, 3)
            log.info(
                "%s completed in %.3fs",
                fields["activity_type"],
                took,
                extra={"ratchet": {"outcome": "completed", "duration_s": took}},
            )
            return result
        finally:
            _context.reset(token)


def _fields(input: ExecuteActivityInput) -> dict[str, Any]:
    info = activity.info()
    fields: dict[str, Any] = {
        "workflow_id": info.workflow_id,
        "run_id": info.workflow_run_id,
        "activity_type": info.activity_type,
        "activity_id": info.activity_id,
        "attempt": info.attempt,
    }
    arg = input.args[0] if input.args else None
    for name in _INPUT_FIELDS:
        value = getattr(arg, name, None)
        if value:
            fields[name] = value
    if "key" not in fields and isinstance(fields.get("step"), int) and info.workflow_id:
        # model and tool requests leave their key out of history; it is derived the same way here
        fields["key"] = keys.call_key(info.workflow_id, fields["step"], fields.get("call_id") or "model")
    return fields
