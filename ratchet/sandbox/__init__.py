"""Running the programs an agent asks for (`run_command`, the verifier, user tools declared
`runs_code`) where they cannot reach the worker: the `Sandbox` protocol and its backends.

- `NsjailSandbox` (RATCHET_SANDBOX=nsjail, the default): fresh Linux namespaces, no root needed.
- `UnconfinedSandbox` (RATCHET_SANDBOX=off): a plain subprocess, the operator's explicit opt-out.
- `UnavailableSandbox`: what a worker holds when its backend cannot run here; every call refuses.

The conformance suite every backend must pass is `ratchet.testing.sandbox`; docs/SECURITY.md says
what each backend enforces and what it does not.
"""

from ratchet.contracts.sandbox import Sandbox, SandboxPolicy, SandboxResult
from ratchet.sandbox.base import (
    DiskQuotaExceeded,
    ProgramNotFound,
    SandboxError,
    SandboxUnavailable,
    UnavailableSandbox,
    WallTimeExceeded,
)
from ratchet.sandbox.choose import SANDBOX_BACKENDS, open_sandbox

__all__ = [
    "DiskQuotaExceeded",
    "ProgramNotFound",
    "SANDBOX_BACKENDS",
    "Sandbox",
    "SandboxError",
    "SandboxPolicy",
    "SandboxResult",
    "SandboxUnavailable",
    "UnavailableSandbox",
    "WallTimeExceeded",
    "open_sandbox",
]
