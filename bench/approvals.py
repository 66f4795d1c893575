"""Signed decisions under measure (issue 41): `approvals` runs of the `bench_approval` profile (every
bench_echo waits for an approval; every tool a regular activity, so its start is an event), taking
turns signed and unsigned on one worker that trusts the bench's key. `approval_ms`: from just before
the client's `approve` to the tool's activity starting (the server's event time; client and server
share the machine's clock). A signed approval signs the claim over the digest the person saw
(the console's page has it; without it the client reads the run's state first) and is checked by
the update's validator; `approval_signed_ratio` is its p50 over the unsigned one's.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from statistics import median
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from temporalio.api.enums.v1 import EventType

from bench.harness import VARIANTS, Env, Variant
from bench.history import percentile
from bench.progress import Progress
from ratchet.client import RatchetClient, RunHandle
from ratchet.contracts.identity import Principal
from ratchet.core.decision_proof import Signer

SCRIPT = {"provider": "scripted", "options": {"script": [
    {"tool_calls": [{"name": "bench_echo", "arguments": {"text": "approve me"}}]}, {"content": "done"},
]}}
BENCHER = Principal(subject="bench", issuer="bench", roles=["approver"], via="token")


async def approval_cost(env: Env, progress: Progress, approvals: int) -> dict[str, Any]:
    key = Ed25519PrivateKey.generate()
    key_file = env.root / "approver.key"
    key_file.write_bytes(key.private_bytes_raw())
    trusted = f"bench:{Signer('bench', key).public}"
    variant = Variant("approvals", "ratchet", VARIANTS["ratchet"].workflow, profile="bench_approval",
                      env=(("BENCH_LOCAL_TOOLS", "0"), ("RATCHET_APPROVER_KEYS", trusted)))
    async with env.worker(variant) as worker:
        unsigned = env.runs(worker.queue)
        signed = RatchetClient(unsigned.temporal, unsigned.settings.model_copy(
            update={"signing_key": key_file, "signing_key_id": "bench", "approver_keys": trusted}))
        progress.begin(f"approvals: {approvals} signed and {approvals} unsigned, taking turns")
        for _ in range(2):  # warm: the worker's first runs, outside the clock
            await _approval_ms(unsigned, None)
            await _approval_ms(signed, BENCHER)
        times: dict[str, list[float]] = {"signed": [], "unsigned": []}
        for _ in range(approvals):
            times["unsigned"].append(await _approval_ms(unsigned, None))
            times["signed"].append(await _approval_ms(signed, BENCHER))
        progress.end(f"p50 signed {median(times['signed']):.0f} ms, unsigned {median(times['unsigned']):.0f} ms")
    return {"approvals": approvals, "approval_ms": times}


async def _approval_ms(client: RatchetClient, who: Principal | None) -> float:
    run = await client.start({"agent": "bench_approval", "objective": "approve", "model": SCRIPT},
                             f"bench-approval-{uuid.uuid4().hex[:8]}")
    call_id, digest = await _pending(run)
    sent_at = time.time()
    await run.approve(call_id, principal=who, digest=digest if who else None)  # the digest the page showed
    await run.result()
    return (_tool_started(await run.history()) - sent_at) * 1000


def _tool_started(history: Any) -> float:
    """When the bench_echo activity started (the server's clock, seconds since the epoch)."""
    scheduled = None
    for event in history.events:
        if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            if event.activity_task_scheduled_event_attributes.activity_type.name == "tool.bench_echo":
                scheduled = event.event_id
        elif event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED:
            if event.activity_task_started_event_attributes.scheduled_event_id == scheduled:
                return event.event_time.ToDatetime().timestamp()
    raise RuntimeError(f"approvals: no bench_echo activity started in {history.workflow_id}")


async def _pending(run: RunHandle) -> tuple[str, str]:
    """The call waiting for approval and its digest, as the console's page shows them (read before
    the clock starts, as the page is before the click)."""
    while True:
        state = await run.state()
        if state.calls.pending_approvals:
            pending = state.calls.pending_approvals[0]
            return pending.call_id, pending.digest
        await asyncio.sleep(0.02)


def approval_figures(section: dict[str, Any]) -> dict[str, float]:
    times = section.get("approval_ms") or {}
    if not times.get("signed") or not times.get("unsigned"):
        return {}
    return {
        "approval_signed_ratio": median(times["signed"]) / median(times["unsigned"]),
        "approval_signed_p50_ms": median(times["signed"]),
        "approval_unsigned_p50_ms": median(times["unsigned"]),
        "approval_signed_p99_ms": percentile(times["signed"], 99),
    }
