"""Ratchet's activities are declared once (ratchet/contracts/activities.py): a worker serves every
declared one under its declared name, and no workflow or activity module spells a name itself."""

from __future__ import annotations

import ast
from pathlib import Path

from ratchet.contracts.activities import ACTIVITIES
from ratchet.plugin import Activities
from ratchet.workflows.sdk_seams import activity_name

ROOT = Path(__file__).resolve().parents[2]


def test_a_worker_serves_every_declared_activity(settings):
    served = {activity_name(fn) for fn in Activities(settings).all()}
    assert {a.name for a in ACTIVITIES} <= served, sorted({a.name for a in ACTIVITIES} - served)


def test_no_module_spells_a_declared_activity_name():
    names = {a.name for a in ACTIVITIES}
    spelled = []
    for folder in ("workflows", "activities", "ratchet"):
        for path in (ROOT / folder).rglob("*.py"):
            if path.name == "activities.py" and path.parent.name == "contracts":
                continue
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.Constant) and node.value in names:
                    spelled.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.value!r}")
    assert not spelled, "\n".join(spelled)
