"""A run's billed cost where people look: its console page (every attempt by cause, failed ones
included), the runs list, and the `RatchetCostUsd` search attribute a visibility query filters on."""

from __future__ import annotations

import os
import re

from ratchet.client import RatchetClient
from ratchet.contracts import Phase
from tests.runs import until
from tests.surfaces.test_console import console  # noqa: F401  (fixture)


async def test_the_billed_cost_is_on_the_run_page_the_runs_list_and_a_search_attribute(
    client, settings, worker, console, openai_server  # noqa: F811
):
    key = os.environ["OPENAI_API_KEY"]
    openai_server.reset()
    openai_server.set_script([{"content": "done " * 400}], key=key)  # about 500 completion tokens: $1 at $2/1k
    openai_server.enqueue_faults([{"status": 500, "usage": True}], key=key)
    rc = RatchetClient(client, settings)
    run = await rc.start({"agent": "priced_echo", "objective": "spend"})
    result = await run.result()
    assert result.phase == Phase.DONE and result.used.cost_usd > 1.0
    report = await run.cost()
    assert report.by_cause["retry"].attempts == 1 and report.by_cause["answer"].attempts == 1

    page = (await console.get(f"/runs/{run.workflow_id}")).text
    billed = re.search(r"<h2 id=billed>Billed <small>\$([0-9.]+), (\d+) attempts</small></h2>(.*?)</table>", page, re.S)
    assert billed and billed.group(1) == f"{report.total.cost_usd:.4f}" and billed.group(2) == "2"
    assert re.search(r"<td>retry</td><td>1</td>", billed.group(3)) and re.search(r"<td>answer</td><td>1</td>", page)
    assert f"${result.used.cost_usd:.4f}" in page  # the state's cost: the same billed total

    async def listed() -> str | None:
        text = (await console.get("/?agent=priced_echo")).text
        found = re.search(rf"<tr><td><a href=\"/runs/{run.workflow_id}\">.*?</tr>", text)
        return found.group(0) if found else None

    row = await until(listed, "the run listed")
    assert f"${result.used.cost_usd:.4f}" in row

    async def found_by_cost() -> bool:
        query = f'WorkflowId = "{run.workflow_id}" AND RatchetCostUsd > 1'
        return [w.id async for w in client.list_workflows(query)] == [run.workflow_id]

    assert await until(found_by_cost, "the run found by RatchetCostUsd > 1")
