"""The console's POST handlers: each the client call the CLI makes, then back to the page it came
from with a note saying what happened (or why not: decided by someone else, closed meanwhile)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any, Literal

from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response

from ratchet.client import InvalidInput, RatchetClient, RatchetError, RunHandle, RunNotFound, validated_run
from ratchet.console.forms_view import start_page
from ratchet.console.guard import Visit
from ratchet.console.html import run_url, waited
from ratchet.contracts.identity import Principal


def _back(visit: Visit, default: str, text: str, kind: str = "ok") -> Response:
    back = visit.form.get("back", "")
    target = back if back.startswith("/") and not back.startswith("//") else default
    return RedirectResponse(visit.note_url(target, text, kind), status_code=303)


SCHEDULE_ACTIONS = ("pause", "resume", "trigger")


async def schedule_action(client: RatchetClient, request: Request, visit: Visit) -> Response:
    """POST /schedules/{name}/{pause,resume,trigger}: what `ratchet schedule` does, recorded as the console's."""
    name, action = request.path_params["name"], request.url.path.rsplit("/", 1)[1]
    schedules = client.schedules
    try:
        if action == "pause":
            await schedules.pause(name, "paused in the console")
        elif action == "resume":
            await schedules.resume(name, "resumed in the console")
        else:
            await schedules.trigger(name)
    except RatchetError as exc:
        return _back(visit, "/schedules", f"{action} {name}: {exc}", "error")
    done = {"pause": "Paused", "resume": "Resumed", "trigger": "Triggered"}[action]
    return _back(visit, "/schedules", f"{done} {name}.")


async def run_action(client: RatchetClient, request: Request, visit: Visit, action: str) -> Response:
    """POST /runs/{id}/{action}, `action` one of ACTIONS (its own route: any other path is 404)."""
    handle = client.get(request.path_params["workflow_id"])
    page = run_url(handle.workflow_id)
    try:
        who = visit.person
        done = await ACTIONS[action](handle, visit.form, who)
    except RatchetError as exc:  # a closed run's update reads "not found" too: _why_not tells them apart
        return _back(visit, page, await _why_not(handle, action, visit.form, exc), "error")
    return _back(visit, page, done)


async def _approve(run: RunHandle, form: dict[str, str], who: Principal) -> str:
    grant = form.get("grant", "").strip()
    if grant and not grant.isdigit():
        raise InvalidInput("form", [f"grant: seconds, not {grant!r}"])
    answer = await run.approve(
        _required(form, "call_id"),
        principal=who,
        digest=form.get("digest") or None,
        grant={"for_s": int(grant)} if grant else None,
    )
    return f"Approved {form['call_id']}" + (f" ({answer.split('; ', 1)[1]})." if grant else ".")


async def _reject(run: RunHandle, form: dict[str, str], who: Principal) -> str:
    reason = form.get("reason") or "rejected by a person"
    await run.reject(_required(form, "call_id"), reason, principal=who, digest=form.get("digest") or None)
    return f"Rejected {form['call_id']}."


async def _decide(run: RunHandle, form: dict[str, str], who: Principal) -> str:
    await run.decide(
        _required(form, "call_id"),
        form.get("choice", ""),
        form.get("result") or None,
        form.get("reason", ""),
        principal=who,
    )
    return f"Decided {form['call_id']}: {form.get('choice')}."


async def _respond(run: RunHandle, form: dict[str, str], who: Principal) -> str:
    action = _required(form, "action")
    to = (form.get("to", "").strip() or None) if action == "hand_back" else None
    await run.respond(action, form.get("text", ""), to=to, by=who.subject)
    return f"Answered: {action}{f' to {to}' if to else ''}."


async def _send(run: RunHandle, form: dict[str, str], who: Principal) -> str:
    await run.send(form.get("text", ""))
    return "Sent: it joins the conversation at the next step."


async def _ask(run: RunHandle, form: dict[str, str], who: Principal) -> str:
    turn = await run.ask(form.get("text", ""), wait=False)
    return f"Asked: turn {turn.turn} answers it." if turn.turn else "Asked: queued behind the turn in flight."


async def _pause(run: RunHandle, form: dict[str, str], who: Principal) -> str:
    await run.pause()
    return "Pause asked: the run pauses at the next step boundary."


async def _resume(run: RunHandle, form: dict[str, str], who: Principal) -> str:
    await run.resume()
    return "Resumed."


async def _cancel(run: RunHandle, form: dict[str, str], who: Principal) -> str:
    await run.cancel()
    return "Cancel asked: the step is cancelled and the run ends under its failure policy."


ACTIONS = {
    "approve": _approve,
    "reject": _reject,
    "decide": _decide,
    "respond": _respond,
    "send": _send,
    "ask": _ask,
    "pause": _pause,
    "resume": _resume,
    "cancel": _cancel,
}


def _required(form: dict[str, str], name: str) -> str:
    value = form.get(name, "").strip()
    if not value:
        raise InvalidInput("form", [f"{name}: required"])
    return value


async def _why_not(run: RunHandle, action: str, form: dict[str, str], exc: RatchetError) -> str:
    """The refusal in a person's terms: who decided the call already, or that the run has closed."""
    try:
        running = await run.running()  # RunNotFound: there is no such run (the 404 page)
    except RunNotFound:
        raise
    except RatchetError:
        return f"{action} failed: {exc}"
    try:
        state = await run.state()
    except RatchetError:
        return f"{action} failed: {exc}"
    call_id = form.get("call_id", "")
    decided = state.calls.decisions.get(call_id) or state.calls.outcome_decisions.get(call_id)
    if action in ("approve", "reject", "decide") and decided is not None:
        verdict = getattr(decided, "choice", None) or (
            "approved" if getattr(decided, "approved", False) else "rejected"
        )
        reason = f" ({decided.reason})" if decided.reason else ""
        return f"{call_id} was already decided: {verdict} by {decided.by}{_when(decided.at)}{reason}."
    if not running:
        return f"The run closed ({state.phase.value}) while the page was open: {action} was not done."
    return f"{action} was refused: {exc}"


def _when(at: str) -> str:
    """` at 14:02:07 UTC (3 min ago)`, from a decision's ISO time (empty if it has none)."""
    try:
        moment = datetime.fromisoformat(at).astimezone(UTC)
    except ValueError:
        return ""
    return f" at {moment:%Y-%m-%d %H:%M:%S} UTC ({waited(moment)} ago)"


async def rollback(client: RatchetClient, request: Request, visit: Visit) -> Response:
    handle = client.get(request.path_params["workflow_id"])
    checkpoint_id = request.path_params["checkpoint_id"]
    asked = visit.form.get("then", "continue")
    if asked not in ("continue", "stop"):
        raise InvalidInput("rollback", [f"then: continue or stop, not {asked!r}"])
    then: Literal["continue", "stop"] = "stop" if asked == "stop" else "continue"
    try:
        who = visit.person
        outcome = await handle.rollback(checkpoint_id, then=then, principal=who)
    except RunNotFound:
        raise
    except RatchetError as exc:
        return _back(visit, run_url(handle.workflow_id), f"Rollback to {checkpoint_id} not done: {exc}", "error")
    kind = "ok" if outcome.complete else "error"
    return _back(visit, run_url(handle.workflow_id), f"Rolled back to {checkpoint_id}: {outcome.summary()}.", kind)


async def fork(client: RatchetClient, request: Request, visit: Visit) -> Response:
    handle = client.get(request.path_params["workflow_id"])
    forked = await handle.fork(request.path_params["checkpoint_id"], visit.form.get("objective") or None)
    return RedirectResponse(visit.note_url(run_url(forked.workflow_id), f"Forked from {handle.workflow_id}."), 303)


async def start(client: RatchetClient, request: Request, visit: Visit) -> Response:
    values = visit.form
    try:
        fields = _run_fields(values)
        run = validated_run(fields)
        started = await client.start(run, values.get("workflow_id", "").strip() or None)
    except InvalidInput as exc:
        return HTMLResponse(start_page(visit.token, values, exc.problems), status_code=400)
    except RatchetError as exc:
        return HTMLResponse(start_page(visit.token, values, [str(exc)]), status_code=409)
    return RedirectResponse(visit.note_url(run_url(started.workflow_id), "Started."), status_code=303)


def _run_fields(values: dict[str, str]) -> dict[str, Any]:
    """The run's fields from the form: the JSON of `extra` under the named fields."""
    problems: list[str] = []
    fields: dict[str, Any] = {}
    extra = values.get("extra", "").strip()
    if extra:
        try:
            fields = json.loads(extra)
        except ValueError as exc:
            problems.append(f"more fields: not JSON: {exc}")
        if not isinstance(fields, dict):
            problems.append("more fields: must be a JSON object")
            fields = {}
    for name in ("agent", "objective", "workspace"):
        if values.get(name, "").strip():
            fields[name] = values[name].strip()
    budget = dict(fields.get("budget") or {})
    for name, kind in (("max_steps", int), ("max_cost_usd", float)):
        raw = values.get(name, "").strip()
        if raw:
            try:
                budget[name] = kind(raw)
            except ValueError:
                problems.append(f"budget.{name}: must be a {'whole ' if kind is int else ''}number, not {raw!r}")
    if budget:
        fields["budget"] = budget
    if problems:
        raise InvalidInput("run", problems)
    return fields
