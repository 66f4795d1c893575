"""Two hosts, one ledger (the stale-result case of the scale-out issue).

Host B finishes a run; the same workflow id is started again (a schedule, a retrying user) and
runs on host A, which goes away mid-tool; host B picks the new run up. With a ledger per host, B's
ledger had never seen the new run's claim of the id and answered the new run's model call with the
old run's reply ("OLD ANSWER"). With one ledger (Postgres) for every host, the new run's claim set
the old run's entries aside, and B calls the model for the new run.
"""

from __future__ import annotations

import uuid

import psycopg
import pytest

from ratchet.contracts import Phase
from tests.ops_workers import start_worker
from tests.runs import scripted, start, wait_for_running_activity

pytestmark = pytest.mark.e2e  # processes as a user runs them: `make test-e2e`, not `make test`


def wait(seconds: float) -> dict:
    return {"tool_calls": [{"name": "probe_wait", "arguments": {"seconds": seconds}}]}


async def test_a_reused_workflow_id_never_gets_the_old_runs_results_on_another_host(client, settings, postgres_server, tmp_path):
    ledger = postgres_server.create_database()

    def host(name: str) -> dict[str, str]:  # a host's own workspaces; only the ledger is shared
        return {
            "RATCHET_LEDGER_URL": ledger, "RATCHET_HOST_ID": name, "RATCHET_SHUTDOWN_GRACE_S": "0.5",
            "RATCHET_WORKSPACE_ROOT": str(tmp_path / name),
        }

    wid = f"dup-{uuid.uuid4().hex[:8]}"
    host_b = await start_worker(settings, **host("b"))
    old = await start(client, settings, scripted("boss", [wait(0.1), {"content": "OLD ANSWER"}]), workflow_id=wid)
    assert (await old.result()).answer == "OLD ANSWER"
    assert await host_b.stop() == 0

    host_a = await start_worker(settings, **host("a"))
    new = await start(client, settings, scripted("boss", [wait(3), {"content": "NEW ANSWER"}]), workflow_id=wid,
                      new_run=True)
    await wait_for_running_activity(new, "tool.probe_wait")
    assert await host_a.stop() == 0  # gone mid-tool: the tool's retry and the rest run on host B
    host_b = await start_worker(settings, **host("b"))
    try:
        result = await new.result()
    finally:
        await host_b.stop()
    assert result.phase == Phase.DONE and result.answer == "NEW ANSWER", result
    with psycopg.connect(ledger) as conn:
        keys = [k for (k,) in conn.execute("SELECT key FROM ratchet_ledger WHERE key LIKE %s", (f"%{wid}/%",))]
    assert f"{wid}/2/model" in keys, keys  # the new run's reply, recorded by host B
    assert any(k.startswith("#") and k.endswith(f"{wid}/2/model") for k in keys), "the old run's reply, set aside"
