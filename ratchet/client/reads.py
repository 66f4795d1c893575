"""What a run holds, read: a page of its conversation (what a continue-as-new left behind read back
from the transcript artifact, ratchet/stores/transcripts.py), a checkpoint's patch (both from the
artifact store the settings name), a closed run's state (kept), and whether it has been planned."""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Awaitable, Callable

from pydantic import ValidationError
from temporalio.client import WorkflowExecutionStatus

from ratchet.client.errors import InvalidInput, NotStartedYet, Refused
from ratchet.client.rpc import RunCalls
from ratchet.contracts import AgentResult, AgentState, Checkpoint, Message, RunMessages, Transcript, TranscriptPage
from ratchet.ops.settings import Settings
from ratchet.stores import transcripts
from ratchet.stores.urls import open_artifacts

CLOSED_STATES = 100
"""Closed runs' states a client keeps (a 200-step run's is about 100 KB)."""
PLANNED_WAIT_S, PLANNED_POLL_S = 30.0, 0.1
"""`RunHandle.planned` waits at most 30 s, asking every 0.1 s."""
FIRST_TASK_EVENTS = 3
"""A new execution's history before its first workflow task completes: started, task scheduled, task started."""


async def transcript(
    calls: RunCalls,
    settings: Settings,
    offset: int,
    limit: int,
    state: AgentState | None,
    read_state: Callable[[], Awaitable[AgentState]],
) -> Transcript:
    """Messages `offset` .. `offset + limit` of the conversation, from `state` if given, else from
    the run's `transcript` query; those from before a continue-as-new from the transcript artifact
    (the run's state names it: `read_state` reads it if not given)."""
    try:
        request = TranscriptPage(offset=offset, limit=limit)
    except ValidationError as exc:
        raise InvalidInput.of("transcript page", exc) from None
    if state is not None:
        page = state.conversation.page(offset, limit)
    else:
        page = await calls.query(RunMessages.TRANSCRIPT, request, result_type=Transcript)
    messages, first = list(page.messages), page.offset
    if offset < page.offset:
        state = state or await read_state()
        earlier = await _earlier(settings, state, offset, min(page.offset, offset + limit))
        if earlier:
            messages, first = (earlier + messages)[:limit], offset
    return Transcript(offset=first, total=page.total, messages=messages)


async def _earlier(settings: Settings, state: AgentState, start: int, stop: int) -> list[Message]:
    """Messages `start` .. `stop` of the whole conversation, from the transcript artifact."""
    if state.conversation.transcript is None:
        return []
    store = open_artifacts(settings.artifact_store_url)
    conversation = await asyncio.to_thread(transcripts.read_all, store, state.conversation.transcript)
    return conversation[start:stop]


async def patch(settings: Settings, checkpoint: Checkpoint) -> str | None:
    """The patch the checkpoint accepted, as a unified diff (None: the step changed no file)."""
    if checkpoint.patch_ref is None:
        return None
    store = open_artifacts(settings.artifact_store_url)
    data = await asyncio.to_thread(store.get, checkpoint.patch_ref)
    return data.decode(errors="replace")


async def closed_state(
    calls: RunCalls, kept: OrderedDict[tuple[str, str], AgentState], read_state: Callable[[], Awaitable[AgentState]]
) -> AgentState:
    """The closed run's state, read once and `kept` (CLOSED_STATES of them, by workflow and run id);
    Refused if the run is running."""
    description = await calls.describe()
    if description.status == WorkflowExecutionStatus.RUNNING:
        raise Refused("closed state", f"{calls.workflow_id} is running")
    key = (calls.workflow_id, description.run_id)
    if key not in kept:
        kept[key] = await read_state()
        while len(kept) > CLOSED_STATES:
            kept.popitem(last=False)
    kept.move_to_end(key)
    return kept[key]


async def planned(
    calls: RunCalls,
    read_state: Callable[..., Awaitable[AgentState]],
    result: Callable[[], Awaitable[AgentResult]],
    timeout_s: float,
) -> bool:
    """Whether the run is planned (or has ended) within `timeout_s` (see `RunHandle.planned`):
    `read_state(timeout_s=...)` reads its state, `result()` raises how a closed run failed."""
    clock = asyncio.get_running_loop()
    deadline = clock.time() + timeout_s
    while (left_s := deadline - clock.time()) > 0:
        description = await calls.describe()
        if description.status != WorkflowExecutionStatus.RUNNING:
            await result()  # RunFailed (RunCancelled) if it did not end well
            return True
        if description.history_length > FIRST_TASK_EVENTS:  # a worker has run it: it answers queries
            try:
                if (await read_state(timeout_s=max(left_s, 1.0))).plan is not None:
                    return True  # a run that failed being planned has none: it closes next
            except NotStartedYet:
                pass
        await asyncio.sleep(min(PLANNED_POLL_S, max(left_s, 0)))
    return False
