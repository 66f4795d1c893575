"""What can go wrong talking to an MCP server, classified on purpose (ratchet/mcp/pool.py uses them,
activities/mcp.py turns them into activity errors):

- `McpConfigError` (ratchet/mcp/config.py): will recur until the configuration changes.
- `McpUnavailable`: the server cannot be started or reached now, and the request never reached it;
  a later attempt may succeed (retried with backoff).
- `McpInterrupted`: the connection broke, or no answer came in time, while a call was in flight: it
  may have acted.
- `McpRefused`: the server answered with an error, or with something that is not a valid result (the
  model is told).
"""

from __future__ import annotations

from typing import Any

from ratchet.contracts import problems


class McpUnavailable(Exception):
    """The server cannot be started or reached now; a later attempt may succeed."""


class McpInterrupted(Exception):
    """The connection broke, or no answer came in time, while a call was in flight: it may have acted."""


class McpRefused(Exception):
    """The server answered a call with an error, or with something that is not a tool result."""


def validated(model: Any, raw: Any, what: str) -> Any:
    """`raw` (an answer's JSON result) as the SDK's pydantic `model`, or McpRefused naming the first problem."""
    from pydantic import ValidationError

    try:
        return model.model_validate(raw, by_name=False)
    except ValidationError as exc:
        raise not_valid(what, exc) from None


def not_valid(what: str, exc: Any) -> McpRefused:
    """An answer that is not a valid `what` (a pydantic ValidationError `exc`), as McpRefused."""
    return McpRefused(f"the server's answer is not a valid {what}: {first_problem(exc)}")


def first_problem(exc: Any) -> str:
    """The first error of a pydantic ValidationError, as `where: what`."""
    [first] = problems(exc, whole="", limit=1)
    where, _, message = first.partition(": ")
    return f"{where}: {message}" if where else message
