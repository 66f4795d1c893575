"""Equal plan parts are held once across runs (workflows/shared_parts.py), and nothing in workflow
code changes a plan in place, which is what makes sharing them safe."""

from __future__ import annotations

import ast
import base64
import gc
import json
from pathlib import Path

from ratchet.contracts import RunPlan
from ratchet.workflows.shared_parts import _PARTS, shared

ROOT = Path(__file__).parents[2]
MUTATORS = {"append", "extend", "insert", "remove", "pop", "clear", "update", "setdefault", "add", "discard", "sort"}


def _plan(**changes) -> RunPlan:
    """A plan decoded from a recorded run (a fresh object each time), with `changes` to its JSON."""
    history = json.loads((ROOT / "tests/histories/plain-run.json").read_text())
    event = next(e for e in history["events"] if e["eventType"] == "EVENT_TYPE_ACTIVITY_TASK_COMPLETED")
    raw = json.loads(base64.b64decode(event["activityTaskCompletedEventAttributes"]["result"]["payloads"][0]["data"]))
    return RunPlan.model_validate({**raw, **changes})


def test_two_runs_of_an_agent_hold_one_copy_of_each_part():
    first, second = shared(_plan()), shared(_plan(workspace="elsewhere"))
    assert first is not second and second.workspace == "elsewhere"
    assert len(first.tools) >= 2
    assert all(a is b for a, b in zip(first.tools, second.tools, strict=True))
    assert first.model is second.model and first.budget is second.budget
    assert second.model_dump() == _plan(workspace="elsewhere").model_dump()  # the plan is the same plan


def test_runs_with_equal_plans_hold_one_plan():
    first, second = shared(_plan()), shared(_plan())
    assert second is first
    assert second.model_dump() == _plan().model_dump()


def test_parts_that_differ_are_not_shared():
    first = shared(_plan())
    other_model = {**first.model.model_dump(mode="json"), "model": "another-model"}
    second = shared(_plan(model=other_model))
    assert second.model is not first.model and second.model.model == "another-model"
    assert second.tools[0] is first.tools[0]


def test_a_part_equal_in_value_but_not_in_the_fields_set_is_not_shared():
    """`exclude_unset` dumps would differ, so a run must keep its own."""
    first = shared(_plan())
    explicit = first.budget.model_dump(mode="json")  # every field given: all of them "set"
    second = shared(_plan(budget=explicit))
    assert second.budget == first.budget
    assert second.budget.model_fields_set != first.budget.model_fields_set
    assert second.budget is not first.budget


def test_a_part_is_let_go_when_no_run_holds_it():
    plan = shared(_plan(model={**_plan().model.model_dump(mode="json"), "model": "only-here"}))
    held = len(_PARTS)
    del plan
    gc.collect()
    assert len(_PARTS) < held


def _chain(node: ast.AST) -> list[str]:
    """The names along an attribute/subscript chain, outermost last: `state.plan.tools[0].x` -> [state, plan, tools, x]."""
    names: list[str] = []
    while isinstance(node, ast.Attribute | ast.Subscript):
        if isinstance(node, ast.Attribute):
            names.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        names.append(node.id)
    return names[::-1]


def _inside_a_plan(target: ast.AST) -> bool:
    """`target` is something held by a plan (not the plan itself): `plan.x`, `state.plan.tools[0]`."""
    names = _chain(target)
    for i, name in enumerate(names):
        if name in ("plan", "plan_before") or name.endswith("_plan"):
            return len(names) - i >= 2
    return False


def test_no_workflow_code_changes_a_plan_in_place():
    found = []
    for path in sorted((ROOT / "workflows").glob("*.py")):
        if path.name == "shared_parts.py":  # swaps the parts of a plan no run holds yet
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            targets: list[ast.AST] = []
            if isinstance(node, ast.Assign):
                targets = node.targets
            elif isinstance(node, ast.AugAssign | ast.AnnAssign):
                targets = [node.target]
            elif isinstance(node, ast.Delete):
                targets = node.targets
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in MUTATORS:
                targets = [node.func.value] if _chain(node.func.value)[-1:] != ["plan"] else [node.func]
            found += [f"{path.name}:{node.lineno}" for t in targets if _inside_a_plan(t)]
    assert not found, f"a plan changed in place (plans share parts: replace state.plan instead): {found}"


def test_the_guard_sees_a_change_in_place():
    for code in (
        "plan.model.temperature = 1",
        "state.plan.tools.append(t)",
        "plan.judges['x'] = s",
        "self.plan.budget.max_steps += 1",
    ):
        node = ast.parse(code).body[0]
        target = (
            node.value.func.value
            if isinstance(node, ast.Expr)
            else (getattr(node, "targets", None) or [node.target])[0]
        )
        assert _inside_a_plan(target), code
    assert not _inside_a_plan(ast.parse("state.plan = p").body[0].targets[0])
