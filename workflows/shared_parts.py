"""Equal parts of the plans of a worker's runs, held once.

A plan is some 9 KiB of pydantic objects, most of it its tool specs, model settings, verifier,
sandbox and approval policy: the same for every run of an agent on the worker. `shared` gives a run
the equal plan another run already holds (runs of an agent in one workspace have equal plans: the
model call's config is named by its digest), or else swaps each part for an equal one another run
holds (a run in another workspace); each is kept while any run holds it, so 1,000 cached runs of an
agent hold one copy, not 1,000.

Safe because plans are never changed in place: a handoff or a rollback replaces `state.plan`
(tests/unit/test_shared_parts.py guards the workflows' code). Equal means the same type, the
same JSON and the same fields set, so a part dumps the same either way (`exclude_unset` included).
Deterministic: which equal object a run holds changes nothing it does.
"""

from __future__ import annotations

import weakref
from typing import Any, cast

from pydantic import BaseModel

from ratchet.contracts import RunPlan

_PARTS: weakref.WeakValueDictionary[tuple[type, str, str], BaseModel] = weakref.WeakValueDictionary()


def shared(plan: RunPlan) -> RunPlan:
    """An equal plan already held; else `plan` with each model-valued field (a model, a list or a
    dict of models) swapped for equal parts already held, or registered as the ones to share."""
    key = _key(plan)
    found = _PARTS.get(key)
    if found is not None:
        return cast(RunPlan, found)  # registered under RunPlan's own key
    for name in type(plan).model_fields:
        value = plan.__dict__.get(name)
        if isinstance(value, BaseModel):
            plan.__dict__[name] = _part(value)
        elif isinstance(value, list) and value and all(isinstance(v, BaseModel) for v in value):
            plan.__dict__[name] = [_part(v) for v in value]
        elif isinstance(value, dict) and value and all(isinstance(v, BaseModel) for v in value.values()):
            plan.__dict__[name] = {k: _part(v) for k, v in value.items()}
    _PARTS[key] = plan
    return plan


def _key(model: BaseModel) -> tuple[type, str, str]:
    return type(model), model.model_dump_json(), model.model_dump_json(exclude_unset=True)


def _part(model: Any) -> Any:
    key = _key(model)
    found = _PARTS.get(key)
    if found is None:
        _PARTS[key] = found = model
    return found
