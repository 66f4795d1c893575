"""Signed decisions on the dev server (issue #41, items 2, 3 and 5): a profile that requires signed
approvals by the ops role refuses an unsigned one, a forged one, an expired one, one for other
arguments and one in a role the tool does not allow, each with nothing changed in the history; a good
one is recorded with its signer, role, digest and proof; a decision sent twice across a worker kill is
taken once; `ratchet audit --verify` passes on the run and fails on a tampered copy of its history."""

from __future__ import annotations

import asyncio
import base64
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx2 as httpx
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from temporalio.api.enums.v1 import EventType

import tests.plugins.ops  # noqa: F401  (the signed-ops profile)
from ratchet.client import RatchetClient, RatchetError, Refused
from ratchet.console.app import build_app
from ratchet.contracts import Budget, Phase
from ratchet.contracts.decisions import DecisionClaim, SignedDecisions, call_digest
from ratchet.contracts.identity import Principal
from ratchet.contracts.rollback import TO_START
from ratchet.core.decision_proof import Signer
from ratchet.core.profiles import AgentProfile, register_profile
from ratchet.ops.http_guard import HttpGuard
from ratchet.worker.main import build_worker
from tests.ops_workers import start_worker
from tests.runs import call, ratchet, scripted, wait_for
from tests.surfaces.test_console import ORIGIN, csrf_of

register_profile(
    AgentProfile(
        name="signed-decider",
        system_prompt="A test agent whose interrupted calls wait for a signed decision.",
        tools=["probe_charge"],
        budget=Budget(max_steps=5),
        approvals=SignedDecisions(signed="required"),
        approvers={"*": ["ops"]},
    )
)
ALICE = Principal(subject="alice", issuer="test-idp", roles=["ops"], via="token")
OPS_KEY = Ed25519PrivateKey.generate()
ROGUE_KEY = Ed25519PrivateKey.generate()


@pytest.fixture
def keyed(settings, tmp_path: Path):
    """Settings whose workers trust OPS_KEY as `ops-1`, and a client that signs with it."""
    key_file = tmp_path / "ops.key"
    key_file.write_bytes(OPS_KEY.private_bytes_raw())
    trusted = f"ops-1:{Signer('ops-1', OPS_KEY).public}"
    return settings.model_copy(update={"approver_keys": trusted, "signing_key": key_file, "signing_key_id": "ops-1"})


async def _waiting(client, keyed, title: str = "prod db"):
    script = [{"tool_calls": [call("create_ticket", title=title)]}, {"content": "opened"}]
    run = await RatchetClient(client, keyed).start(scripted("signed-ops", script))
    state = await wait_for(run, lambda s: s.calls.pending_approvals)
    return run, state.calls.pending_approvals[0]


def _proof(run, pending, key=OPS_KEY, **changes):
    now = datetime.now(UTC)
    claim = DecisionClaim(
        run_id=run.workflow_id,
        call_id=pending.call_id,
        digest=pending.digest,
        decision="approve",
        subject="alice",
        issuer="test-idp",
        roles=["ops"],
        issued_at=now.isoformat(),
        expires_at=(now + timedelta(minutes=5)).isoformat(),
    )
    return Signer("ops-1", key).sign(claim.model_copy(update=changes))


async def _accepted(run) -> list[str]:
    events = (await run.history()).events
    kind = EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED
    return [
        e.workflow_execution_update_accepted_event_attributes.accepted_request.input.name
        for e in events
        if e.event_type == kind
    ]


async def test_bad_proofs_are_refused_and_change_nothing(client, keyed, settings):
    async with build_worker(client, keyed, graceful_shutdown_timeout=timedelta(0)):
        run, pending = await _waiting(client, keyed)
        unsigned = RatchetClient(client, settings).get(run.workflow_id)  # no signing key
        past = datetime.now(UTC) - timedelta(hours=1)
        other = call_digest(
            "create_ticket", (await run.state()).plan.tool("create_ticket").schema_digest, {"title": "x"}
        )
        refusals = {
            "unsigned decision refused": unsigned.approve(pending.call_id),
            "forged or altered": run.approve(pending.call_id, proof=_proof(run, pending, key=ROGUE_KEY)),
            "expired at": run.approve(
                pending.call_id,
                proof=_proof(
                    run, pending, issued_at=past.isoformat(), expires_at=(past + timedelta(minutes=5)).isoformat()
                ),
            ),
            "signed for other arguments": run.approve(pending.call_id, digest=other, principal=ALICE),
            "may be decided on by: ops": run.approve(
                pending.call_id, principal=ALICE.model_copy(update={"roles": ["approver"]})
            ),
        }
        for expected, attempt in refusals.items():
            with pytest.raises(Refused, match=expected):
                await attempt
        state = await run.state()
        assert state.calls.decisions == {} and [p.call_id for p in state.calls.pending_approvals] == [pending.call_id]
        assert await _accepted(run) == []  # refused by the validator: nothing of them in the history
        assert "approved" in await run.approve(pending.call_id, principal=ALICE)
        assert (await run.result()).phase == Phase.DONE


async def test_a_signed_approval_is_recorded_and_audited(client, keyed, tmp_path):
    async with build_worker(client, keyed, graceful_shutdown_timeout=timedelta(0)):
        run, pending = await _waiting(client, keyed)
        signer = {"RATCHET_SIGNING_KEY": str(keyed.signing_key), "RATCHET_SIGNING_KEY_ID": "ops-1"}
        person = {"RATCHET_SUBJECT": "alice", "RATCHET_ROLES": "viewer,ops"}
        code, out = await ratchet(keyed, "approve", run.workflow_id, pending.call_id, extra_env={**signer, **person})
        assert code == 0, out
        await run.result()
        decision = (await run.state()).calls.decisions[pending.call_id]
        assert (decision.subject, decision.issuer, decision.role, decision.by) == ("alice", "ratchet-cli", "ops", "alice")
        assert (
            decision.digest == pending.digest
            and decision.proof is not None
            and decision.proof.claim.digest == pending.digest
        )
        [entry] = await run.audit()
        assert entry.verified and entry.digest_checked and entry.subject == "alice"
        env = {"RATCHET_APPROVER_KEYS": keyed.approver_keys}
        code, out = await ratchet(keyed, "audit", run.workflow_id, "--verify", extra_env=env)
        assert code == 0, out
        assert json.loads(out.splitlines()[0])["proof"]["claim"]["subject"] == "alice"
        tampered = tmp_path / "tampered.json"
        tampered.write_text(_with_other_arguments((await run.history()).to_json()))
        code, out = await ratchet(
            keyed, "audit", run.workflow_id, "--verify", "--history", str(tampered), extra_env=env
        )
        assert code == 1 and "digest mismatch" in out, out


def _with_other_arguments(history_json: str) -> str:
    """The history with the ticket's title changed in the scheduled tool call's input."""
    history = json.loads(history_json)
    for event in history["events"]:
        attrs = event.get("activityTaskScheduledEventAttributes")
        if attrs and attrs["activityType"]["name"] == "tool.create_ticket":
            payload = attrs["input"]["payloads"][0]
            invocation = json.loads(base64.b64decode(payload["data"]))
            invocation["arguments"]["title"] = "prod db DROPPED"
            payload["data"] = base64.b64encode(json.dumps(invocation).encode()).decode()
    return json.dumps(history)


@pytest.mark.e2e  # two worker processes started (about 20 s)
async def test_a_decision_sent_twice_across_a_worker_kill_is_taken_once(client, keyed):
    worker = await start_worker(keyed, RATCHET_APPROVER_KEYS=keyed.approver_keys)
    try:
        run, pending = await _waiting(client, keyed)
        proof = _proof(run, pending)
        worker.kill()
        # sent while no worker runs: the service may refuse it at once (no poller) or hold it for one
        first = asyncio.create_task(_sent(run.approve(pending.call_id, proof=proof)))
        worker = await start_worker(keyed, RATCHET_APPROVER_KEYS=keyed.approver_keys)
        again = [await _sent(run.approve(pending.call_id, proof=proof)) for _ in range(2)]  # sent again, twice
        answers = [await first, *again]
        assert (await asyncio.wait_for(run.result(), 60)).phase == Phase.DONE
    finally:
        worker.kill()
    taken = [a for a in answers if isinstance(a, str)]
    assert len(taken) == 1, answers
    others = [a for a in answers if not isinstance(a, str)]
    # a repeat is answered with who decided, or (sent once the approved call had finished the run) that it ended
    repeats = [str(a) for a in others if a is not answers[0]]
    assert all("already decided: approved by alice at" in a or "has ended DONE" in a for a in repeats), answers
    assert await _accepted(run) == ["approve"]  # the history holds one decision


async def _sent(request) -> str | Exception:
    """The answer of a request, or the error it met."""
    try:
        return await request
    except RatchetError as exc:
        return exc


async def test_the_console_signs_as_its_token_person_and_its_run_page_shows_the_decision(client, keyed, tmp_path):
    console_key = tmp_path / "console.key"
    console_key.write_bytes(ROGUE_KEY.private_bytes_raw())
    trusted = f"{keyed.approver_keys},console:{Signer('console', ROGUE_KEY).public}"
    settings = keyed.model_copy(update={"approver_keys": trusted, "signing_key": console_key, "signing_key_id": "console",
                                        "roles": ["ops"]})
    app = build_app(RatchetClient(client, settings), HttpGuard.for_server("127.0.0.1", same_origin=True))
    async with (
        build_worker(client, settings, graceful_shutdown_timeout=timedelta(0)),
        httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=ORIGIN, timeout=60) as console,
    ):
        run, pending = await _waiting(client, settings)
        page = await console.get(f"/runs/{run.workflow_id}")
        assert f'name=digest value="{pending.digest}"' in page.text  # the digest the person sees is the one signed
        form = {"csrf": csrf_of(page.text), "call_id": pending.call_id, "digest": pending.digest}
        done = await console.post(f"/runs/{run.workflow_id}/approve", data=form)
        assert done.status_code == 303
        await run.result()
        shown = (await console.get(f"/runs/{run.workflow_id}")).text
        decision = (await run.state()).calls.decisions[pending.call_id]
    assert (decision.subject, decision.issuer, decision.role) == ("console", "ratchet-console", "ops")
    decisions = shown.split("<h2>Decisions</h2>", 1)[1]
    assert "console (ratchet-console)" in decisions and "<td>ops</td>" in decisions and "signed, verified" in decisions


async def test_a_running_runs_rollback_is_signed_and_an_unsigned_one_refused(client, keyed, settings):
    script = [{"tool_calls": [call("create_ticket", title="never")]}, {"content": "done"}]
    async with build_worker(client, keyed, graceful_shutdown_timeout=timedelta(0)):
        run = await RatchetClient(client, keyed).start(scripted("signed-ops", script))
        await wait_for(run, lambda s: s.calls.pending_approvals)
        with pytest.raises(Refused, match="unsigned decision refused"):
            await RatchetClient(client, settings).get(run.workflow_id).rollback(TO_START, then="stop")
        with pytest.raises(Refused, match="rollback may be decided on by: approver"):  # approvers' "*"
            await run.rollback(TO_START, then="stop", principal=ALICE)
        outcome = await run.rollback(TO_START, then="stop", principal=ALICE.model_copy(update={"roles": ["ops", "approver"]}))
        assert outcome.report is not None and (await run.result()).phase == Phase.ROLLED_BACK
        [entry] = await run.audit()
    assert (entry.update, entry.decision, entry.subject, entry.verified) == ("rollback", f"rollback:{TO_START}", "alice", True)


async def test_a_decision_is_held_across_continue_as_new_and_audited_from_every_execution(client, keyed):
    script = [{"tool_calls": [call("create_ticket", title="prod db")]}, {"tool_calls": [call("wait", seconds=600)]}]
    async with build_worker(client, keyed, graceful_shutdown_timeout=timedelta(0)):
        run = await RatchetClient(client, keyed).start(scripted("signed-ops-handover", script))
        pending = (await wait_for(run, lambda s: s.calls.pending_approvals)).calls.pending_approvals[0]
        await run.approve(pending.call_id, principal=ALICE)
        await wait_for(run, lambda s: s.continued >= 1 and s.phase == Phase.ACTING)
        with pytest.raises(Refused, match="already decided: approved by alice at"):
            await run.approve(pending.call_id, principal=ALICE)
        [entry] = await run.audit()
        latest = (await run.describe()).run_id
        details = await run.current_details()  # what the Temporal Web UI shows
        assert f"`{pending.call_id}` approved by alice (test-idp, role ops), signed" in details, details
        await run.cancel()
    assert entry.verified and entry.digest_checked and entry.execution != latest


async def test_a_decision_on_an_unknown_outcome_is_signed_for_its_choice(client, keyed, settings):
    script = [{"tool_calls": [call("probe_charge", label="order-9", crash_after_acting=True)]}, {"content": "charged"}]
    async with build_worker(client, keyed, graceful_shutdown_timeout=timedelta(0)):
        run = await RatchetClient(client, keyed).start(scripted("signed-decider", script, workspace="signed-decide"))
        pending = (await wait_for(run, lambda s: s.calls.pending_decisions)).calls.pending_decisions[0]
        with pytest.raises(Refused, match="unsigned decision refused"):
            await RatchetClient(client, settings).get(run.workflow_id).decide(pending.call_id, "assume_done", "R-9")
        retry = _proof(run, pending, decision="decide:retry")  # signed for another choice
        with pytest.raises(Refused, match="it is for decision 'decide:retry', not 'decide:assume_done'"):
            await run.decide(pending.call_id, "assume_done", "R-9", proof=retry)
        await run.decide(pending.call_id, "assume_done", "R-9", principal=ALICE)
        assert (await run.result()).phase == Phase.DONE
        decided = (await run.state()).calls.outcome_decisions[pending.call_id]
    assert (decided.subject, decided.role, decided.digest) == ("alice", "ops", pending.digest)
