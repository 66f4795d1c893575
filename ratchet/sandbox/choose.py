"""Which backend RATCHET_SANDBOX names."""

from __future__ import annotations

import logging

from ratchet.contracts.sandbox import Sandbox

log = logging.getLogger("ratchet.sandbox")

SANDBOX_BACKENDS = ("nsjail", "off")
"""RATCHET_SANDBOX's values: `nsjail` (the default) or `off` (no sandbox: the operator's opt-out)."""
UNCONFINED_WARNING = (
    "RATCHET_SANDBOX=off: programs the agent runs (run_command, verifiers, code-running tools) run "
    "UNCONFINED as the worker's user: they can read the worker's keys through /proc, other runs' "
    "workspaces and .ratchet/, write outside the workspace and reach the network (docs/SECURITY.md)"
)


def open_sandbox(name: str) -> Sandbox:
    """The backend named `name` (one of SANDBOX_BACKENDS); `off` is logged as a WARNING."""
    if name == "nsjail":
        from ratchet.sandbox.nsjail import NsjailSandbox

        return NsjailSandbox()
    if name == "off":
        from ratchet.sandbox.unconfined import UnconfinedSandbox

        log.warning(UNCONFINED_WARNING)
        return UnconfinedSandbox()
    raise ValueError(f"unknown sandbox {name!r}: one of {', '.join(SANDBOX_BACKENDS)}")
