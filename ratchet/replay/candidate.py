"""The code installed here as a deploy candidate (`ratchet deploy check BUILD`): its build id, its
replay of histories (the replay gate's engine, ratchet/replay/replayer.py: the recorded corpus and
the open runs that would move to it), and whether a moving session's state reads on it.

A session moves to a new build by continuing as new (workflows/upgrades.py): the new build gets the
old build's state as its `Continuation`, so that state must validate as the new code's
`AgentState`, and every tool its plan names must exist there, or the session's next turn fails on
the new build. `ratchet.client` asks the runs; this module is the code's side, the worker's
(profiles, tools, MCP servers, workflows), which the client does not import.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError
from temporalio.client import WorkflowHistory

from ratchet.client.deploy_reports import CheckProblem
from ratchet.contracts import AgentState, Continuation, problems
from ratchet.deploys.build import default_build_id
from ratchet.ops.settings import Settings
from ratchet.plugin import RatchetOptions
from ratchet.replay import replayer
from ratchet.replay.outcomes import OK, Outcome

DEFAULT_CORPUS = Path("tests/histories")
"""The recorded histories `ratchet replay` gates on, when the check runs in the repository."""


@dataclass
class LocalCandidate:
    """The code of this process: `options`' profiles, tools and MCP servers, today's workflows."""

    options: RatchetOptions
    build_id: str
    corpus: Sequence[Path] = field(default_factory=list)
    workflows: Sequence[type] | None = None
    """The workflow definitions replayed (default: the worker's AgentWorkflow and RollbackWorkflow)."""

    @classmethod
    def from_settings(cls, settings: Settings, corpus: Sequence[Path] | None = None) -> LocalCandidate:
        """As a worker here would run: RATCHET_BUILD_ID, else the digest of this code, profiles,
        tools and MCP servers (ratchet/deploys/build.py)."""
        options = RatchetOptions.from_settings(settings)
        build_id = settings.build_id or default_build_id(options.profiles, options.tools, options.mcp)
        if corpus is None:
            corpus = [DEFAULT_CORPUS] if DEFAULT_CORPUS.is_dir() else []
        return cls(options, build_id, list(corpus))

    async def replay(self, histories: Sequence[WorkflowHistory]) -> tuple[int, list[CheckProblem]]:
        files = [replayer.load_file(path) for path in replayer.history_files(self.corpus)]
        runs = [replayer.Loaded("run", history) for history in histories]
        outcomes = await replayer.replay([*files, *runs], self.options.data_converter, self.workflows)
        return len(files), [_problem(o) for o in outcomes if o.result != OK]

    def unreadable(self, workflow_id: str, state: Mapping[str, Any]) -> list[CheckProblem]:
        def problem(where: str, what: str) -> CheckProblem:
            return CheckProblem(workflow_id=workflow_id, source="state", where=where, what=what)

        try:
            parsed = AgentState.model_validate(state)
            Continuation.model_validate({"continuation": state})
        except ValidationError as exc:
            what = f"does not read as build {self.build_id}'s state"
            return [problem("state", f"{what}: {p}") for p in problems(exc, "state")]
        if parsed.plan is None:
            return []
        turn = f"after turn {parsed.session.turn_number}"
        found = []
        for spec in parsed.plan.tools:
            if spec.mcp is not None and spec.mcp not in self.options.mcp.servers:
                what = f"its plan calls tool {spec.name!r} on MCP server {spec.mcp!r}, unknown to build {self.build_id}"
                found.append(problem(f"{turn}, state.plan.tools", what))
            elif spec.mcp is None and spec.name not in self.options.tools.tools:
                what = f"its plan names tool {spec.name!r}, which build {self.build_id} does not have"
                found.append(problem(f"{turn}, state.plan.tools", what))
        return found


def _problem(outcome: Outcome) -> CheckProblem:
    source = "run" if outcome.source == "run" else outcome.source
    what = f"{outcome.result}: {outcome.detail}" if outcome.detail else outcome.result
    return CheckProblem(workflow_id=outcome.workflow_id, source=source, where=outcome.divergence, what=what)
