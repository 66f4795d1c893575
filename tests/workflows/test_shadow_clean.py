"""`ratchet shadow clean` (issue #40): after it, nothing of the shadow is left on the worker side
(its ledger entries and chain, its private workspace on the host that held it) while the original's
world (workspace, tracker, ledger rows, artifacts) is byte for byte as before; a shadow still
running is stopped first (dev server, scripted model, the SQLite ledger). That the executions go
(history, state, stream) is tests/workflows/test_shadows.py's (the dev server takes ~40 s)."""

from __future__ import annotations

import sqlite3

from ratchet.client.shadows import Candidate
from ratchet.contracts import ArtifactRef, Phase
from ratchet.stores.urls import open_artifacts
from tests.runs import call, ratchet, runs, scripted, start, wait_for
from tests.workflows.test_rollback import write
from tests.workflows.test_shadows import DONE_AFTER_TWO_CHECKPOINTS, world


def left_in_ledger(settings, workflow_id: str) -> list[tuple]:
    """The ledger's entries (any chain's) and chain of the run `workflow_id`."""
    with sqlite3.connect(settings.ledger_path) as conn:
        rows = conn.execute("SELECT key FROM ledger WHERE instr(key, ?) > 0", (f"{workflow_id}/",)).fetchall()
        chains = conn.execute("SELECT workflow_id FROM chains WHERE workflow_id = ?", (workflow_id,)).fetchall()
    return rows + chains


def artifacts(settings) -> set[str]:
    """The digests in the artifact store, each read back whole (a blob's name is its content's hash)."""
    store = open_artifacts(settings.artifact_store_url)
    digests = set(store.digests())
    for digest in digests:
        store.get(ArtifactRef.json(digest))  # ArtifactCorrupt if its bytes changed
    return digests


async def test_clean_leaves_nothing_of_the_shadow_and_the_original_byte_for_byte(client, settings, worker):
    original = await start(client, settings, scripted("saga", DONE_AFTER_TWO_CHECKPOINTS, workspace="clean-orig"))
    assert (await original.result()).phase == Phase.DONE
    shadows = runs(client, settings).shadows
    batch = await shadows.start([original.workflow_id], Candidate(model="recorded"))
    [diff] = (await shadows.report(batch, wait_s=60)).runs
    assert diff.same, diff
    shadow = diff.shadow.workflow_id
    private = settings.workspace_root / (await runs(client, settings).get(shadow).state()).plan.workspace
    written = left_in_ledger(settings, shadow)
    assert (private / "b.txt").exists() and len(written) > 1  # its entries and its chain
    before, stored = await world(settings, original.workflow_id, "clean-orig"), artifacts(settings)

    [cleaned] = await shadows.clean(batch)
    assert (cleaned.workflow_id, cleaned.ledger_entries) == (shadow, len(written) - 1)
    assert cleaned.removed_on == [settings.host_id] and cleaned.lost == []
    assert not private.exists() and left_in_ledger(settings, shadow) == []
    assert await world(settings, original.workflow_id, "clean-orig") == before, "the original's world is untouched"
    assert artifacts(settings) >= stored, "every artifact there before is there, whole"


async def test_clean_stops_a_running_shadow_first_and_says_what_it_deleted(client, settings, worker):
    original = await start(
        client,
        settings,
        scripted("saga", [{"tool_calls": [write("a.txt", "v1\n")]}, {"content": "done"}], workspace="clean-run"),
    )
    assert (await original.result()).phase == Phase.DONE
    slower = [
        {"tool_calls": [write("a.txt", "v2\n")]},
        {"tool_calls": [call("probe_wait", seconds=8)]},
        {"content": "x"},
    ]
    shadows = runs(client, settings).shadows
    batch = await shadows.start(
        [original.workflow_id], Candidate(model="scripted:other", model_options={"script": slower})
    )
    shadow = shadows.get(batch.pairs[0].shadow)
    state = await wait_for(
        shadow, lambda s: s.calls.tool_calls.items and s.calls.tool_calls.items[-1].tool == "write_file"
    )
    private = settings.workspace_root / state.plan.workspace
    code, out = await ratchet(settings, "shadow", "clean", batch.id)
    assert code == 0, out
    assert f"deleted {shadow.workflow_id}: " in out and f"its workspace removed on {settings.host_id}" in out
    assert (await shadow.closed_state()).phase != Phase.DONE  # stopped in its probe_wait: terminated
    assert left_in_ledger(settings, shadow.workflow_id) == [] and not private.exists()
    assert (settings.workspace_root / "clean-run" / "a.txt").read_text() == "v1\n"
