"""How `RunCalls.query` asks again: a query with no answer in its wait is asked with a longer one, up
to QUERY_LONGEST_WAIT_S (a dropped query holds the run's one buffered place for its whole wait); a
query refused as busy is asked again after a short pause with the same wait; past the deadline,
Unavailable. The handle here is a stand-in for the service's answers (DEADLINE_EXCEEDED, busy);
tests/client/test_client_queries.py drives the real race on a dev server."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

import pytest
from temporalio.service import RPCError, RPCStatusCode

from ratchet.client import rpc as client_rpc
from ratchet.client.errors import Unavailable
from ratchet.client.rpc import RunCalls


class Service:
    """Answers each query with the next of `answers` (a status code raised, or a value returned)
    once its wait has passed, recording the waits it was given."""

    def __init__(self, answers: list[RPCStatusCode | str]) -> None:
        self.answers, self.waits = list(answers), []

    async def query(self, name: str, *args: Any, result_type: type, rpc_timeout: timedelta) -> Any:
        self.waits.append(rpc_timeout.total_seconds())
        answer = self.answers.pop(0) if self.answers else RPCStatusCode.DEADLINE_EXCEEDED
        if answer == RPCStatusCode.DEADLINE_EXCEEDED:
            await asyncio.sleep(rpc_timeout.total_seconds())
        if isinstance(answer, RPCStatusCode):
            raise RPCError("no", answer, b"")
        return answer


@pytest.fixture(autouse=True)
def short_waits(monkeypatch):
    monkeypatch.setattr(client_rpc, "QUERY_FIRST_WAIT_S", 0.01)
    monkeypatch.setattr(client_rpc, "QUERY_LONGEST_WAIT_S", 0.04)
    monkeypatch.setattr(client_rpc, "QUERY_BUSY_PAUSE_S", 0.001)


async def test_the_waits_grow_to_the_longest_and_stop_at_the_deadline():
    service = Service([])
    with pytest.raises(Unavailable, match="no worker answered within 0.3 s"):
        await RunCalls(None, "run-1", service).query("state", result_type=str, timeout_s=0.3)  # type: ignore[arg-type]
    assert service.waits[:4] == [0.01, 0.02, 0.04, 0.04]
    assert max(service.waits) == 0.04
    assert sum(service.waits) == pytest.approx(0.3, abs=0.02)  # the last wait is what was left


async def test_a_busy_refusal_is_asked_again_with_the_same_wait_and_answered():
    busy, dropped = RPCStatusCode.RESOURCE_EXHAUSTED, RPCStatusCode.DEADLINE_EXCEEDED
    service = Service([dropped, busy, busy, "the state"])
    answer = await RunCalls(None, "run-1", service).query("state", result_type=str, timeout_s=5)  # type: ignore[arg-type]
    assert answer == "the state"
    assert service.waits == [0.01, 0.02, 0.02, 0.02]
