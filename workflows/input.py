"""Validating the workflow input inside the workflow, so bad input fails the run at once.

The run method takes a RawValue rather than a typed model: a typed parameter is decoded by the
SDK before our code runs, and a decode failure there fails the workflow *task*, which Temporal
retries forever. Here every problem becomes a non-retryable `InvalidInput` that names the field.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError
from temporalio import workflow
from temporalio.common import RawValue
from temporalio.exceptions import ApplicationError

from ratchet.contracts import AgentRun, Continuation, ErrorType, problems

EXAMPLE = '{"agent": "coder", "objective": "make the tests pass"}'


def invalid(message: str) -> ApplicationError:
    return ApplicationError(message, type=ErrorType.INVALID_INPUT, non_retryable=True)


def any_inputs(init: Callable[..., None]) -> Callable[..., None]:
    """An `@workflow.init` that takes a start with any number of inputs: the SDK makes the workflow
    object with all of them before any interceptor runs, so a second `--input` would fail the
    workflow *task* there (retried forever). The object is made from the first; the start guard
    (ratchet/start_guard.py) then fails the run as `InvalidInput`. The signature the SDK reads
    (inspect follows `__wrapped__`) stays `init`'s, so its type hints still decode one input."""

    @functools.wraps(init)
    def tolerant(self: Any, *inputs: Any) -> None:
        init(self, *inputs[:1])

    return tolerant


def decoded(raw: RawValue | None, example: str, what: str = "run") -> Any:
    """A workflow's raw input as plain data; none, or what cannot be decoded, is `InvalidInput`."""
    if raw is None:
        raise invalid(f"no input: start the {what} with --input '{example}'")
    try:
        return workflow.payload_converter().from_payload(raw.payload)
    except Exception as exc:  # any decode failure is the caller's input, not our bug
        raise invalid(f"input is not valid JSON: {exc}") from None


M = TypeVar("M", bound=BaseModel)


def validated(raw: RawValue | None, model: type[M], example: str, what: str) -> M:
    """A workflow's raw input as `model`; none, undecodable or invalid input is `InvalidInput`."""
    value = decoded(raw, example, what)
    try:
        return value if isinstance(value, model) else model.model_validate(value)
    except ValidationError as exc:
        raise invalid(f"{what} input: {exc.errors()[0]['loc']}: {exc.errors()[0]['msg']}") from None


def parse_run(raw: RawValue | None) -> AgentRun | Continuation:
    value = decoded(raw, EXAMPLE)
    if isinstance(value, AgentRun):
        return value
    if isinstance(value, dict) and "continuation" in value and set(value) <= {"continuation", "stream"}:
        return Continuation.model_validate(value)  # our own continue-as-new input
    if not isinstance(value, dict):
        raise invalid(f"input must be a JSON object like {EXAMPLE}, got {type(value).__name__}")
    try:
        return AgentRun.model_validate(value)
    except ValidationError as exc:
        raise invalid("invalid input: " + describe(exc)) from None


def continued(raw: RawValue | None) -> Continuation | None:
    """The input, if it is our own continue-as-new input (read when the workflow is made, so a
    message in a continuation's first task finds its state); None otherwise (`parse_run` reports
    bad input)."""
    try:
        parsed = parse_run(raw)
    except Exception:  # reported by parse_run in the run itself
        return None
    return parsed if isinstance(parsed, Continuation) else None


def describe(exc: ValidationError) -> str:
    """`budget.max_steps: Input should be greater than or equal to 1; ...`"""
    return "; ".join(problems(exc, "(input)", limit=10))
