"""Schedules (`RatchetClient.schedules`): runs, or a session's messages, started by time on
Temporal Schedules (ratchet/contracts/schedules.py), not a loop of our own.

A schedule is an ordinary Temporal Schedule: the Web UI lists it and `temporal schedule describe
--schedule-id NAME` shows it. Its action starts `AgentWorkflow` with the validated run (each firing's
run is `{name}-{time}`, a run like any other) or `RatchetScheduledMessage` for a session. This module
is the only caller of the schedule RPCs; `list` reads the phases of the latest firings' runs from
visibility, one query for all of them.
"""

from __future__ import annotations

import builtins
from collections.abc import Callable, Mapping
from datetime import datetime, timedelta
from typing import Any, Protocol

from pydantic import ValidationError
from temporalio.client import (
    Client,
    Schedule,
    ScheduleActionStartWorkflow,
    ScheduleAlreadyRunningError,
    ScheduleBackfill,
    ScheduleDescription,
    ScheduleHandle,
    ScheduleIntervalSpec,
    ScheduleOverlapPolicy,
    SchedulePolicy,
    ScheduleSpec,
    ScheduleState,
)
from temporalio.service import RPCError, RPCStatusCode

from ratchet.client.errors import InvalidInput, RatchetError, Refused, RunNotFound, rpc_error
from ratchet.client.starting import start_summary, validated_run
from ratchet.contracts import (
    AGENT_WORKFLOW,
    AgentState,
    SCHEDULED_MESSAGE_WORKFLOW,
    ScheduledMessage,
    ScheduledRun,
    ScheduleInfo,
    ScheduleRequest,
)
from ratchet.contracts.search_attributes import RunAttributes
from ratchet.ops.settings import Settings


class _Run(Protocol):
    """What a schedule needs of a run's handle (`RatchetClient.get`): its state."""

    async def state(self, timeout_s: float | None = None) -> AgentState: ...


OVERLAP = {
    "skip": ScheduleOverlapPolicy.SKIP,
    "buffer_one": ScheduleOverlapPolicy.BUFFER_ONE,
    "buffer_all": ScheduleOverlapPolicy.BUFFER_ALL,
    "cancel_other": ScheduleOverlapPolicy.CANCEL_OTHER,
    "terminate_other": ScheduleOverlapPolicy.TERMINATE_OTHER,
    "allow_all": ScheduleOverlapPolicy.ALLOW_ALL,
}
OURS = (AGENT_WORKFLOW, SCHEDULED_MESSAGE_WORKFLOW)
WHEN = "ratchet_when"
"""The schedule's memo: when it fires as it was asked (the server keeps a cron line as calendars)."""


class ScheduleNotFound(RatchetError):
    def __init__(self, name: str) -> None:
        super().__init__(f"schedule {name!r} not found")
        self.name = name


class Schedules:
    """The schedules of the namespace whose action is a Ratchet run or session message."""

    def __init__(self, temporal: Client, settings: Settings, get: Callable[[str], _Run]) -> None:
        self.temporal, self.settings, self._get = temporal, settings, get

    async def create(self, request: ScheduleRequest | Mapping[str, Any]) -> ScheduleInfo:
        """A new schedule; refused (InvalidInput naming the field) for a cron line the server cannot
        parse, a run that does not validate, a session that is not an open session, a name in use."""
        req = _validated(request)
        if req.session_id is not None:
            await self._require_session(req.session_id)
        try:
            handle = await self.temporal.create_schedule(req.name, self._schedule(req), memo={WHEN: _asked_when(req)})
        except ScheduleAlreadyRunningError:
            raise InvalidInput("schedule", [f"name: a schedule {req.name!r} exists (delete it first)"]) from None
        except RPCError as exc:
            raise _refused(f"cannot create schedule {req.name!r}", exc, self._address, "cron") from None
        return await self._require(handle.id)

    async def _require_session(self, session_id: str) -> None:
        try:
            state = await self._get(session_id).state(timeout_s=30)
        except RunNotFound:
            raise InvalidInput("schedule", [f"session_id: no run {session_id!r}"]) from None
        if state.plan is None or state.plan.session is None:
            raise InvalidInput("schedule", [f"session_id: run {session_id!r} is not a session"])
        if state.phase.terminal:
            raise InvalidInput("schedule", [f"session_id: session {session_id!r} ended {state.phase}"])

    def _schedule(self, req: ScheduleRequest) -> Schedule:
        if req.run is not None:
            run = validated_run(req.run)
            action = ScheduleActionStartWorkflow(
                AGENT_WORKFLOW,
                run.model_dump(exclude_none=True, mode="json"),
                id=req.name,
                task_queue=self.settings.task_queue,
                static_summary=start_summary(run),
            )
        else:
            assert req.session_id is not None and req.text is not None
            message = ScheduledMessage(session_id=req.session_id, text=req.text)
            action = ScheduleActionStartWorkflow(
                SCHEDULED_MESSAGE_WORKFLOW,
                message.model_dump(mode="json"),
                id=req.name,
                task_queue=self.settings.task_queue,
                static_summary=f"to session {req.session_id}: {_short(req.text)}",
            )
        spec = ScheduleSpec(
            cron_expressions=[req.cron] if req.cron else [],
            intervals=[ScheduleIntervalSpec(every=timedelta(seconds=req.every_s))] if req.every_s else [],
            jitter=timedelta(seconds=req.jitter_s) if req.jitter_s else None,
            time_zone_name=req.time_zone,
        )
        policy = SchedulePolicy(
            overlap=OVERLAP[req.overlap],
            catchup_window=timedelta(seconds=req.catchup_window_s) if req.catchup_window_s else None,
        )
        return Schedule(action=action, spec=spec, policy=policy, state=ScheduleState(paused=req.paused, note=req.note))

    async def list(self) -> builtins.list[ScheduleInfo]:
        """Every schedule whose action starts a Ratchet run or message, by name."""
        try:
            names = [entry.id async for entry in await self.temporal.list_schedules()]
        except RPCError as exc:
            raise rpc_error("cannot list schedules", exc, self._address) from None
        found = []
        for name in sorted(names):
            try:
                info = await self.describe(name)
            except ScheduleNotFound:  # deleted since it was listed
                continue
            if info is not None:
                found.append(info)
        return found

    async def describe(self, name: str) -> ScheduleInfo | None:
        """The schedule `name` (None: it is not a Ratchet schedule); ScheduleNotFound if none."""
        return await self._info(self.temporal.get_schedule_handle(name))

    async def pause(self, name: str, note: str = "") -> ScheduleInfo:
        await self._call(name, lambda h: h.pause(note=note or "paused by ratchet"))
        return await self._require(name)

    async def resume(self, name: str, note: str = "") -> ScheduleInfo:
        await self._call(name, lambda h: h.unpause(note=note or "resumed by ratchet"))
        return await self._require(name)

    async def trigger(self, name: str) -> ScheduleInfo:
        """Fire now, under the schedule's overlap policy (a firing `skip` refuses does not start)."""
        await self._call(name, lambda h: h.trigger())
        return await self._require(name)

    async def backfill(self, name: str, start: datetime, end: datetime) -> ScheduleInfo:
        """Fire at every time the spec names from `start` to `end` (both included), as if the
        schedule had run then."""
        if end <= start:
            raise InvalidInput("backfill", [f"end ({end.isoformat()}) must be after start ({start.isoformat()})"])
        await self._call(name, lambda h: h.backfill(ScheduleBackfill(start_at=start, end_at=end)))
        return await self._require(name)

    async def delete(self, name: str) -> None:
        """Delete the schedule; the runs it started go on."""
        await self._call(name, lambda h: h.delete())

    async def _require(self, name: str) -> ScheduleInfo:
        info = await self.describe(name)
        if info is None:
            raise Refused("schedule", f"{name!r} is not a Ratchet schedule")
        return info

    async def _call(self, name: str, act: Callable[[ScheduleHandle], Any]) -> None:
        handle = self.temporal.get_schedule_handle(name)
        if await self._info(handle) is None:
            raise Refused("schedule", f"{name!r} is not a Ratchet schedule (its action starts another workflow)")
        try:
            await act(handle)
        except RPCError as exc:
            raise _refused(f"schedule {name!r}", exc, self._address) from None

    async def _info(self, handle: ScheduleHandle) -> ScheduleInfo | None:
        try:
            found = await handle.describe()
        except RPCError as exc:
            if exc.status == RPCStatusCode.NOT_FOUND:
                raise ScheduleNotFound(handle.id) from None
            raise rpc_error(f"cannot describe schedule {handle.id!r}", exc, self._address) from None
        action = found.schedule.action
        if not isinstance(action, ScheduleActionStartWorkflow) or action.workflow not in OURS:
            return None
        return await self._described(handle.id, found, action)

    async def _described(
        self, name: str, found: ScheduleDescription, action: ScheduleActionStartWorkflow
    ) -> ScheduleInfo:
        recent = [
            ScheduledRun(
                workflow_id=a.action.workflow_id,
                scheduled_at=a.scheduled_at,
                started_at=a.started_at,
            )
            for a in found.info.recent_actions
            if hasattr(a.action, "workflow_id")
        ]
        await self._phases(recent)
        state, info, policy = found.schedule.state, found.info, found.schedule.policy
        return ScheduleInfo(
            name=name,
            when=await found.memo_value(WHEN, None) or _when(found.schedule.spec),
            target=await self._target(action),
            paused=state.paused,
            note=state.note or "",
            overlap=policy.overlap.name.lower(),
            next_runs=list(info.next_action_times[:5]),
            recent=recent,
            fired=info.num_actions,
            missed=info.num_actions_missed_catchup_window,
            skipped=info.num_actions_skipped_overlap,
        )

    async def _phases(self, recent: builtins.list[ScheduledRun]) -> None:
        """Each firing's status and phase, from one visibility query over their ids."""
        if not recent:
            return
        ids = ", ".join(f"'{r.workflow_id}'" for r in recent)
        by_id: dict[str, tuple[str | None, str | None]] = {}
        try:
            async for execution in self.temporal.list_workflows(f"WorkflowId IN ({ids})"):
                phase = execution.search_attributes.get(RunAttributes.PHASE.name) or [None]
                status = execution.status.name if execution.status else None
                by_id[execution.id] = (status, str(phase[0]) if phase[0] is not None else None)
        except RPCError as exc:
            raise rpc_error("cannot list scheduled runs", exc, self._address) from None
        for run in recent:
            run.status, run.phase = by_id.get(run.workflow_id, (None, None))

    async def _target(self, action: ScheduleActionStartWorkflow) -> str:
        """What a firing starts, in a few words, from the action's input (described schedules carry
        it as payloads, encrypted if the client has codec keys)."""
        try:
            [value] = await self.temporal.data_converter.decode(list(action.args)[:1]) if action.args else [None]
        except Exception:  # another namespace's key, a payload we cannot read: name the workflow only
            value = None
        if not isinstance(value, dict):
            return action.workflow
        if action.workflow == SCHEDULED_MESSAGE_WORKFLOW:
            return f"session {value.get('session_id')}: {_short(str(value.get('text', '')))}"
        return f"{value.get('agent')}: {_short(str(value.get('objective', '')))}"

    @property
    def _address(self) -> str:
        return self.temporal.service_client.config.target_host


def _validated(request: ScheduleRequest | Mapping[str, Any]) -> ScheduleRequest:
    if isinstance(request, ScheduleRequest):
        return request
    try:
        return ScheduleRequest.model_validate(dict(request))
    except ValidationError as exc:
        raise InvalidInput.of("schedule", exc) from None


def _refused(doing: str, exc: RPCError, address: str, field: str | None = None) -> RatchetError:
    """A refused schedule request names what was wrong (the server parses the cron line)."""
    if exc.status == RPCStatusCode.NOT_FOUND:
        return InvalidInput("schedule", [f"{doing}: not found"])
    if exc.status == RPCStatusCode.INVALID_ARGUMENT:
        return InvalidInput("schedule", [f"{field}: {exc.message}" if field else exc.message])
    return rpc_error(doing, exc, address)


def _when(spec: ScheduleSpec) -> str:
    parts = [f"cron {c}" for c in spec.cron_expressions]
    parts += [f"every {int(i.every.total_seconds())}s" for i in spec.intervals]
    if not parts and spec.calendars:  # the server turns a cron line into calendars
        parts = [f"{len(spec.calendars)} calendar spec(s)"]
    if spec.jitter:
        parts.append(f"jitter {int(spec.jitter.total_seconds())}s")
    if spec.time_zone_name:
        parts.append(spec.time_zone_name)
    return ", ".join(parts) or "-"


def _asked_when(req: ScheduleRequest) -> str:
    when = f"cron {req.cron}" if req.cron else f"every {req.every_s:g}s"
    if req.jitter_s:
        when += f", jitter {req.jitter_s:g}s"
    return when + (f", {req.time_zone}" if req.time_zone else "")


def _short(text: str, limit: int = 60) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
