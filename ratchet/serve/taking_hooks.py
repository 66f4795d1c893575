"""What `POST /hooks/{name}` does with a delivery (ratchet/serve/hooks.py has the hooks, their
signatures and templates): the signature first (an unsigned request learns nothing, not even whether
its body parses), then the body's JSON, then the hook's action through `ratchet.client`:

- `run`: `RatchetClient.start` under the id `hook-{name}-{delivery}`; 202 `{"run_id", "duplicate"}`
  (`duplicate`: that delivery had started it already: nothing new started);
- `message`: `RunHandle.ask(text, message_id=delivery, wait=False)`; 202 `{"run_id", "message_id", "turn"}`
  (the same delivery again is the same message, answered once);
- `decision`: `approve` or `reject` of the call, recorded as made by `hook:{name}`; 202 with the
  run's word.

A run's input that does not validate is 400 naming the field (the client's InvalidInput), as on
`POST /agui`; a run that refuses a message or decision is 409 with its reason.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from typing import Any

from starlette.responses import JSONResponse, Response

from ratchet.client import IdInUse, RatchetClient
from ratchet.serve.hooks import Hook, HookError, render, run_id, verify


async def take_hook(
    client: RatchetClient, hooks: Mapping[str, Hook], name: str, body: bytes, headers: Mapping[str, str]
) -> Response:
    hook = hooks.get(name)
    if hook is None:
        return JSONResponse({"error": f"no hook {name!r} is declared (RATCHET_HOOKS)"}, status_code=404)
    try:
        delivery = verify(hook, body, headers, time.time())
        try:
            data = json.loads(body)
        except ValueError as exc:
            raise HookError(400, f"the body is not JSON: {exc}") from None
        if hook.run is not None:
            answer = await _run(client, name, hook.run, data, delivery)
        elif hook.message is not None:
            answer = await _message(client, hook, data, delivery)
        else:
            answer = await _decision(client, name, hook, data)
    except HookError as exc:
        return JSONResponse({"error": exc.reason}, status_code=exc.status)
    return JSONResponse({"hook": name, "delivery": delivery, **answer}, status_code=202)


async def _run(client: RatchetClient, name: str, template: dict[str, Any], data: Any, delivery: str) -> dict[str, Any]:
    workflow_id = run_id(name, delivery)
    try:
        await client.start(render(template, data, "run"), workflow_id=workflow_id)
    except IdInUse:
        return {"run_id": workflow_id, "duplicate": True}
    return {"run_id": workflow_id, "duplicate": False}


async def _message(client: RatchetClient, hook: Hook, data: Any, delivery: str) -> dict[str, Any]:
    assert hook.message is not None
    session_id, text = render(hook.message.session_id, data, "session_id"), render(hook.message.text, data, "text")
    if not isinstance(session_id, str) or not isinstance(text, str):
        raise HookError(400, "message: session_id and text must render to text")
    answer = await client.get(session_id).ask(text, message_id=delivery, wait=False)
    return {"run_id": session_id, "message_id": delivery, "turn": answer.turn}


async def _decision(client: RatchetClient, name: str, hook: Hook, data: Any) -> dict[str, Any]:
    assert hook.decision is not None
    fields = {k: render(v, data, f"decision.{k}") for k, v in hook.decision.model_dump().items()}
    if fields["decision"] not in ("approve", "reject"):
        raise HookError(400, f"decision.decision: must render to approve or reject, not {fields['decision']!r}")
    run = client.get(str(fields["workflow_id"]))
    by = f"hook:{name}"
    if fields["decision"] == "approve":
        said = await run.approve(str(fields["call_id"]), by=by)
    else:
        said = await run.reject(str(fields["call_id"]), reason=str(fields["reason"]), by=by)
    return {"run_id": run.workflow_id, "call_id": fields["call_id"], "decision": fields["decision"], "said": said}
