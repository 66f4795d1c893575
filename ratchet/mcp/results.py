"""An MCP `CallToolResult` as the `ToolResult` the model sees, and the undo record of a compensable call.

- Text blocks are the output, in order; structured content is the output when there is no text
  (as JSON), and it is checked against the tool's pinned output schema.
- Images, audio and binary resources go to the artifact store; the output names each by digest
  (`[image image/png, 5120 bytes: artifact sha256:...]`), so the transcript references them.
  Embedded text resources are inlined; resource links are named.
- `isError: true`, and a result that breaks the tool's output schema, come back as tool errors
  (`ok=False`, `ToolError`): the model sees them and can react; the activity does not fail.
Long outputs are offloaded by the activity like any tool's (activities/tools.py `offload`).
"""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any

from ratchet.contracts import ErrorType, ToolResult, scrub_text
from ratchet.core.outputs import compiled
from ratchet.core.tools import Blobs, undo_record
from ratchet.mcp.catalog import McpTool


def tool_result(tool: McpTool, result: Any, artifacts: Blobs) -> tuple[ToolResult, Any]:
    """(the call's ToolResult, its structured content) for an SDK `CallToolResult`. Puts binary
    content into `artifacts` (synchronously: call it in a thread)."""
    parts = [_block_text(block, artifacts) for block in result.content]
    structured = result.structured_content
    if structured is not None and not any(getattr(b, "type", None) == "text" for b in result.content):
        parts.append(json.dumps(structured, ensure_ascii=False))
    text = scrub_text("\n".join(parts)) or "(no output)"
    if result.is_error:
        return ToolResult(ok=False, output=f"{tool.name} failed: {text}", error_type=ErrorType.TOOL_ERROR), None
    problem = schema_problem(tool, structured, "structured_content" in result.model_fields_set)
    if problem is not None:
        return ToolResult(ok=False, output=f"{tool.name}: {problem}", error_type=ErrorType.TOOL_ERROR), None
    return ToolResult(ok=True, output=text), structured


def _block_text(block: Any, artifacts: Blobs) -> str:
    kind = getattr(block, "type", "?")
    if kind == "text":
        return block.text
    if kind in ("image", "audio"):
        return _stored(kind, block.data, block.mime_type, artifacts)
    if kind == "resource":
        resource = block.resource
        if hasattr(resource, "text"):
            return f"[resource {resource.uri}]\n{resource.text}"
        return _stored(
            f"resource {resource.uri}", resource.blob, resource.mime_type or "application/octet-stream", artifacts
        )
    if kind == "resource_link":
        return f"[resource link {block.uri}: {block.name}]"
    return f"[{kind} content, not shown]"


def _stored(what: str, data: str, media_type: str, artifacts: Blobs) -> str:
    try:
        raw = base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        return f"[{what} {media_type}: its data is not valid base64]"
    ref = artifacts.put(raw, media_type)
    return f"[{what} {media_type}, {len(raw)} bytes: artifact sha256:{ref.digest}]"


def schema_problem(tool: McpTool, structured: Any, given: bool) -> str | None:
    """Why `structured` breaks the tool's pinned output schema, or None (no schema: anything goes)."""
    if tool.output_schema is None:
        return None
    if structured is None and not given:
        return "the server returned no structured content, though the tool declares an output schema"
    validator = compiled(json.dumps(tool.output_schema, sort_keys=True))
    if isinstance(validator, str):
        return f"the tool declares an invalid output schema: {validator}"
    return _problem(validator, structured, "/", "the server's result does not match the tool's output schema: at ")


def arguments_problem(tool: McpTool, arguments: dict[str, Any]) -> str | None:
    """Why `arguments` break the tool's pinned input schema (said to the model), or None."""
    validator = compiled(json.dumps(tool.input_schema, sort_keys=True))
    if isinstance(validator, str):
        return None  # the server's schema is broken: let the server judge the call
    return _problem(validator, arguments, ".", f"invalid arguments for {tool.name}: ")


def _problem(validator: Any, value: Any, joiner: str, prefix: str) -> str | None:
    from jsonschema.exceptions import best_match

    error = best_match(validator.iter_errors(value))
    if error is None:
        return None
    where = joiner.join(str(p) for p in error.absolute_path) or ("(the result)" if joiner == "/" else "(arguments)")
    return f"{prefix}{where}: {error.message[:300]}"


def stores_artifacts(result: Any) -> bool:
    """Whether `tool_result` puts anything into the artifact store (binary content)."""
    return any(
        getattr(b, "type", None) in ("image", "audio") or hasattr(getattr(b, "resource", None), "blob")
        for b in result.content
    )


def undo_of(tool: McpTool, arguments: dict[str, Any], structured: Any = None) -> dict[str, Any]:
    """The undo record of a call of a compensable tool: the compensating tool and its arguments
    (`Compensation.arguments` resolved against the call's arguments and structured result), or the
    reason they cannot be known (the undo then fails, naming it)."""
    compensation = tool.compensation
    assert compensation is not None
    try:
        resolved = {name: _resolve(value, arguments, structured) for name, value in compensation.arguments.items()}
    except LookupError as exc:
        return undo_record(f"cannot undo: {exc}", server=tool.server, tool=compensation.tool, problem=str(exc))
    shown = ", ".join(f"{k}={json.dumps(v, ensure_ascii=False)[:40]}" for k, v in resolved.items())
    return undo_record(
        f"{compensation.tool}({shown}) on MCP server {tool.server}",
        server=tool.server,
        tool=compensation.tool,
        arguments=resolved,
    )


def _resolve(value: Any, arguments: dict[str, Any], structured: Any) -> Any:
    if not isinstance(value, str) or not value.startswith("$"):
        return value
    head, _, path = value.partition(".")
    if head == "$arguments":
        found = arguments
    elif head == "$result":
        if structured is None:
            raise LookupError(f"{value}: the call returned no structured result")
        found = structured
    else:
        return value
    for part in path.split(".") if path else []:
        if isinstance(found, dict) and part in found:
            found = found[part]
        elif isinstance(found, list) and part.isdigit() and int(part) < len(found):
            found = found[int(part)]
        else:
            raise LookupError(f"{value}: the call's {head[1:]} have no {part!r}")
    return found
