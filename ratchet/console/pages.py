"""The console's GET handlers: each asks `ratchet.client` and renders a view."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path

from starlette.requests import Request
from starlette.responses import FileResponse, HTMLResponse, Response, StreamingResponse

from ratchet.client import InvalidInput, NotStartedYet, RatchetClient, RatchetError, Refused, RunHandle
from ratchet.client.costs import CostReport
from ratchet.console.cost_view import cost_section
from ratchet.console.deploys_view import deploys_page
from ratchet.console.schedules_view import schedules_page
from ratchet.console.forms_view import error_page, start_page
from ratchet.console.guard import Visit
from ratchet.console.handoffs_view import handed_page
from ratchet.console.run_view import TRANSCRIPT_PAGE, plan_page, run_page, sealed_page, shown_checkpoints, waiting_of
from ratchet.console.shadows_view import shadows_page
from ratchet.console.runs_view import Progress, RunFilter, Waiting, inbox_page, runs_page
from ratchet.contracts import AgentState, Checkpoint
from ratchet.contracts.events import RunEvent
from ratchet.contracts.rollback import TO_START
from ratchet.payloads.codec import CodecKeyError

PAGE_SIZE = 50
ROW_STATE_TIMEOUT_S = 1.0
"""How long the runs page waits for a running row's state (its step and cost) before a dash."""
INBOX_RUNS = 200
FOLDER = Path(__file__).with_name("static")
STATIC = {"console.js": "text/javascript", "console.css": "text/css"}


async def runs(client: RatchetClient, request: Request, visit: Visit) -> Response:
    params = request.query_params
    chosen = RunFilter(
        params.get("agent", "").strip(), params.get("phase", ""), params.get("awaiting", ""), params.get("session", "")
    )
    if chosen.errors():
        page = runs_page(None, chosen, "; ".join(chosen.errors()), temporal_ui=temporal_ui(client))
        return HTMLResponse(page, status_code=400)
    listing = await client.list_page(**chosen.client_args(), page_size=PAGE_SIZE, page=params.get("page") or None)
    # a run that waits or has closed shows its steps and cost in visibility; one thinking or acting
    # is asked (likely cached on its worker: an idle one asked would be replayed there)
    running = [r.workflow_id for r in listing.runs if r.status == "RUNNING" and r.phase in (None, "RUNNING")]
    found = await asyncio.gather(*(_progress(client, workflow_id) for workflow_id in running))
    progress = {workflow_id: p for workflow_id, p in zip(running, found) if p is not None}
    page = runs_page(listing, chosen, first=not params.get("page"), progress=progress, temporal_ui=temporal_ui(client))
    return HTMLResponse(page)


def temporal_ui(client: RatchetClient) -> str:
    """The Temporal Web UI's page of the client's namespace (RATCHET_TEMPORAL_UI_URL, else the dev server's)."""
    return client.settings.temporal_ui(client.temporal.namespace)


async def _progress(client: RatchetClient, workflow_id: str) -> Progress | None:
    """A running row's step, turn and cost, if its worker answers within ROW_STATE_TIMEOUT_S."""
    try:
        state = await asyncio.wait_for(client.get(workflow_id).state(ROW_STATE_TIMEOUT_S), ROW_STATE_TIMEOUT_S + 0.5)
    except (RatchetError, TimeoutError, CodecKeyError):
        return None
    return Progress(state.step, state.session.turn_number, state.used.cost_usd)


async def inbox(client: RatchetClient, request: Request, visit: Visit) -> Response:
    approvals, decisions = await asyncio.gather(
        client.list(awaiting_approval=True, running=True, limit=INBOX_RUNS),
        client.list(phase="AWAITING_DECISION", running=True, limit=INBOX_RUNS),
    )
    ids = list(dict.fromkeys(r.workflow_id for r in approvals + decisions))
    limit = asyncio.Semaphore(16)

    async def of(workflow_id: str) -> list[Waiting] | str:
        async with limit:
            try:
                return waiting_of(await client.get(workflow_id).state())
            except (RatchetError, CodecKeyError) as exc:
                return f"{workflow_id}: {exc}"

    found = await asyncio.gather(*(of(i) for i in ids))
    waiting = [w for f in found if not isinstance(f, str) for w in f]
    problems = [f for f in found if isinstance(f, str)]
    return HTMLResponse(inbox_page(waiting, visit.token, problems, visit.note(request)))


async def handoffs(client: RatchetClient, request: Request, visit: Visit) -> Response:
    """The runs handed to people: `?person=alice` or `?role=reviewers` (neither: anyone)."""
    person = request.query_params.get("person", "").strip() or None
    role = request.query_params.get("role", "").strip() or None
    items = await client.inbox(person=person, role=role, limit=INBOX_RUNS)  # InvalidInput: the 400 page
    inbox = f"person:{person}" if person else f"role:{role}" if role else ""
    return HTMLResponse(handed_page(items, visit.token, inbox, visit.note(request)))


async def schedules(client: RatchetClient, request: Request, visit: Visit) -> Response:
    return HTMLResponse(schedules_page(await client.schedules.list(), visit.token, visit.note(request)))


async def deploys(client: RatchetClient, request: Request, visit: Visit) -> Response:
    return HTMLResponse(deploys_page(await client.deploys.status()))


async def shadows(client: RatchetClient, request: Request, visit: Visit) -> Response:
    """A shadow batch's report, as the shadows stand (InvalidInput for an unknown batch: a 400 page)."""
    return HTMLResponse(shadows_page(await client.shadows.report(request.path_params["batch"], wait_s=0)))


async def start_form(client: RatchetClient, request: Request, visit: Visit) -> Response:
    return HTMLResponse(start_page(visit.token, {"agent": request.query_params.get("agent", "")}))


async def run(client: RatchetClient, request: Request, visit: Visit) -> Response:
    handle = client.get(request.path_params["workflow_id"])
    running = await handle.running()  # RunNotFound: the 404 page
    try:
        return await _run(handle, running, request, visit)
    except CodecKeyError as exc:  # encrypted, and this console lacks the keys: what visibility knows
        return HTMLResponse(sealed_page(await handle.summary(), str(exc), temporal_ui=temporal_ui(client)))


async def _run(handle: RunHandle, running: bool, request: Request, visit: Visit) -> Response:
    offset, older = _whole(request, "offset"), _whole(request, "checkpoints")
    if running:
        end = await handle.stream_end()  # first: the page's live part starts after its state
        state = await _started(handle)
        transcript = await handle.transcript(offset, TRANSCRIPT_PAGE, state=state)
    else:  # replayed once for this console, then kept; the conversation paged from it
        end, state = 0, await handle.closed_state()
        transcript = await handle.transcript(offset, TRANSCRIPT_PAGE, state=state)
    shown = shown_checkpoints(state, older)
    patches = dict(zip([c.id for c in shown], await asyncio.gather(*(_patch(handle, c) for c in shown))))
    ui, note = temporal_ui(handle.client), visit.note(request)
    billed = cost_section(await _cost(handle))
    page = run_page(state, running, transcript, patches, visit.token, end, note, older, temporal_ui=ui, billed=billed)
    return HTMLResponse(page)


async def _cost(handle: RunHandle) -> CostReport | str:
    """The run's billed cost, or why the billing ledger (the ledger's database) cannot be read."""
    try:
        return await handle.cost()
    except Exception as exc:  # a console that cannot reach the ledger's database still shows the run
        return f"{type(exc).__name__}: {exc}"


START_WAIT_S = 5.0
"""How long a run's page waits for a run that has not run its first workflow task yet (a page
opened right after the start) before it says so."""


async def _started(handle: RunHandle) -> AgentState:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + START_WAIT_S
    while True:
        try:
            return await handle.state()
        except NotStartedYet:
            if loop.time() > deadline:
                raise
            await asyncio.sleep(0.1)


def _whole(request: Request, name: str) -> int:
    try:
        return max(0, int(request.query_params.get(name, "0")))
    except ValueError:
        raise InvalidInput("page", [f"{name}: must be a whole number"]) from None


async def _patch(handle: RunHandle, checkpoint: Checkpoint) -> str | None:
    try:
        return await handle.patch(checkpoint)
    except Exception as exc:  # a missing artifact must not hide the run's page
        return f"(the patch could not be read: {exc})"


async def plan(client: RatchetClient, request: Request, visit: Visit) -> Response:
    handle = client.get(request.path_params["workflow_id"])
    checkpoint_id = request.path_params["checkpoint_id"]
    running = await handle.running()
    if checkpoint_id != TO_START:
        await handle.checkpoint(checkpoint_id)  # Refused, naming the checkpoints it has
    try:
        items = await handle.rollback_plan(checkpoint_id)
    except Refused as exc:
        return HTMLResponse(error_page(409, "No rollback plan", str(exc)), status_code=409)
    return HTMLResponse(plan_page(handle.workflow_id, checkpoint_id, items, running, visit.token))


async def events(client: RatchetClient, request: Request, visit: Visit) -> Response:
    """The run's stream as Server-Sent Events, from `from_offset` (or after `Last-Event-ID`)."""
    last = request.headers.get("Last-Event-ID")
    raw = str(int(last) + 1) if last and last.isdigit() else request.query_params.get("from_offset", "0")
    if not raw.isdigit():
        raise InvalidInput("stream", [f"from_offset: must be an offset (a whole number), not {raw!r}"])
    topics = [t for t in request.query_params.get("topics", "").split(",") if t]
    stream = await client.get(request.path_params["workflow_id"]).open_stream(int(raw), topics, shared=True)
    return StreamingResponse(_sse(stream), media_type="text/event-stream", headers={"Cache-Control": "no-cache"})


async def _sse(stream: AsyncIterator[RunEvent]) -> AsyncIterator[str]:
    yield ": stream open\n\n"
    try:
        async for event in stream:
            yield f"id: {event.offset}\nevent: {event.kind}\ndata: {event.model_dump_json()}\n\n"
    except RatchetError as exc:
        yield f"event: console_error\ndata: {json.dumps(str(exc))}\n\n"


async def static(request: Request, visit: Visit) -> Response:
    name = request.path_params["name"]
    if name not in STATIC:
        return HTMLResponse(error_page(404, "Not found", f"no file {name}"), status_code=404)
    return FileResponse(FOLDER / name, media_type=STATIC[name])
