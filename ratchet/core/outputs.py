"""Typed final answers: the output schema a profile or run gives (a JSON Schema, or the name of a
pydantic model registered on the worker), resolved when the run is planned and checked against each
final answer by `model.call`. An answer that does not match goes back to the model as a validation
error (bounded by the profile's `max_bad_tool_calls`, within the budget); one that matches is the
run's `AgentResult.output`."""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel

from ratchet.contracts import OutputSpec

FINAL_ANSWER = "final_answer"
"""The tool through which providers without a native structured-output mode (Anthropic, scripted)
take a typed final answer: its arguments are the answer."""


@dataclass
class OutputTypes:
    """Pydantic models a run or profile may name as its output schema, by name."""

    types: dict[str, type[BaseModel]] = field(default_factory=dict)

    def register(self, model: type[BaseModel], name: str | None = None) -> type[BaseModel]:
        self.types[name or model.__name__] = model
        return model


default_output_types = OutputTypes()
register_output_type = default_output_types.register
"""`register_output_type(TicketSummary)`: runs may then say `"output_schema": "TicketSummary"`."""


def resolve(given: dict[str, Any] | str, types: OutputTypes) -> OutputSpec:
    """The output spec of a run: a registered model's JSON Schema, or the JSON Schema given, checked.
    Raises ValueError saying what is wrong (the caller names the field)."""
    if isinstance(given, str):
        model = types.types.get(given)
        if model is None:
            known = ", ".join(sorted(types.types)) or "none"
            raise ValueError(f"no output type {given!r} is registered on this worker (it has: {known})")
        schema = model.model_json_schema()
        return OutputSpec(name=given, json_schema=schema)
    problem = compiled(json.dumps(given))
    if isinstance(problem, str):
        raise ValueError(f"not a valid JSON Schema: {problem}")
    if given.get("type") != "object":
        raise ValueError('the schema\'s top level must be an object (`"type": "object"`)')
    return OutputSpec(name=str(given.get("title") or "output"), json_schema=given)


def check(spec: OutputSpec, answer: str | None) -> tuple[Any, str | None]:
    """(the answer as JSON, None) if it matches the schema, else (None, what is wrong)."""
    try:
        value = json.loads(answer or "")
    except ValueError:
        return None, "it is not JSON"
    from jsonschema.exceptions import best_match

    error = best_match(compiled(json.dumps(spec.json_schema)).iter_errors(value))
    if error is None:
        return value, None
    where = "/".join(str(p) for p in error.absolute_path) or "(the answer)"
    return None, f"{where}: {error.message[:300]}"


@functools.lru_cache(maxsize=1024)
def compiled(schema: str) -> Any:
    """A JSON schema's compiled validator, or why the schema is invalid (a str). Cached by the
    schema's text: checking and compiling one costs about 1 ms, validating with it tens of
    microseconds. Typed final answers and MCP tools' schemas (ratchet/mcp/results.py) use it."""
    from jsonschema import SchemaError
    from jsonschema.validators import validator_for

    loaded = json.loads(schema)
    kind = validator_for(loaded)
    try:
        kind.check_schema(loaded)
    except SchemaError as exc:
        return exc.message
    return kind(loaded)
