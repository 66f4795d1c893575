"""Helpers for starting agent runs in tests."""

from __future__ import annotations

import uuid
from typing import Any

from temporalio.client import Client, WorkflowHandle

from ratchet.contracts import AgentResult, AgentState
from ratchet.ops.settings import Settings
from ratchet.contracts import AGENT_WORKFLOW
from ratchet.workflows.agent import AgentWorkflow


def scripted(agent: str, script: list[dict], objective: str = "do the task", **extra: Any) -> dict:
    return {"agent": agent, "objective": objective, "model": {"provider": "scripted", "options": {"script": script}}, **extra}


async def start(client: Client, settings: Settings, run: dict, workflow_id: str | None = None) -> WorkflowHandle:
    return await client.start_workflow(
        AGENT_WORKFLOW,
        run,
        id=workflow_id or f"run-{uuid.uuid4().hex[:10]}",
        task_queue=settings.task_queue,
        result_type=AgentResult,
    )


async def state_of(handle: WorkflowHandle) -> AgentState:
    return await handle.query(AgentWorkflow.state)


async def activity_attempts(handle: WorkflowHandle, activity_type: str) -> list[int]:
    """Attempt numbers of each started activity of a type, from the history."""
    history = await handle.fetch_history()
    scheduled: dict[int, str] = {}
    attempts = []
    for event in history.events:
        if event.HasField("activity_task_scheduled_event_attributes"):
            scheduled[event.event_id] = event.activity_task_scheduled_event_attributes.activity_type.name
        if event.HasField("activity_task_started_event_attributes"):
            attrs = event.activity_task_started_event_attributes
            if scheduled.get(attrs.scheduled_event_id) == activity_type:
                attempts.append(attrs.attempt)
    return attempts
