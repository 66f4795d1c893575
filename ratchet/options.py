"""`RatchetOptions`: what `RatchetPlugin` (ratchet/plugin.py) wires, and the one place Ratchet builds
its default backends from the settings: the ledger, the artifact store, the tool, profile and
provider registries (RATCHET_PLUGINS' modules imported first), the data converter, the sandbox
(probed: one that cannot run here leaves the code-running tools out) and the MCP servers."""

from __future__ import annotations

import dataclasses
import importlib
import logging
from dataclasses import dataclass

from pydantic import ValidationError
from temporalio.converter import DataConverter

from ratchet.contracts import problems
from ratchet.core.profiles import ProfileRegistry, default_profiles
from ratchet.core.tools import ToolRegistry, default_registry
from ratchet.mcp.config import McpConfigError, load_servers
from ratchet.mcp.pool import McpPool
from ratchet.models.builtin import builtin_providers
from ratchet.models.provider import ProviderRegistry
from ratchet.ops.secrets import name_secret_variables
from ratchet.ops.settings import Settings, SettingsError, load_settings
from ratchet.payloads.converter import data_converter as converter_for  # `data_converter` is an option's name
from ratchet.sandbox import Sandbox, SandboxUnavailable, UnavailableSandbox, open_sandbox
from ratchet.stores.artifacts import ArtifactStore
from ratchet.stores.billing import BillingStore
from ratchet.stores.ledger import Ledger
from ratchet.stores.urls import open_artifacts, open_ledger

log = logging.getLogger("ratchet.options")

BUILTIN_TOOL_MODULES = (
    "ratchet.activities.workspace_tools",
    "ratchet.activities.tracker_tools",
    "ratchet.activities.agent_tools",
    "ratchet.activities.time_tools",
    "ratchet.activities.memory_tools",
)
"""Modules whose `@tool` functions are Ratchet's built-in tools."""


def builtin_tools() -> ToolRegistry:
    """The tool registry with Ratchet's built-in tools in it (imports their modules). It is the
    registry `ratchet.core.tools.tool` registers into, so tools of RATCHET_PLUGINS modules (or any
    module using `@tool`) imported before a worker starts are in it too."""
    for name in BUILTIN_TOOL_MODULES:
        importlib.import_module(name)
    return default_registry


def builtin_profiles() -> ProfileRegistry:
    """The profile registry with the built-in `coder` profile; `register_profile` registers into it."""
    return default_profiles


def load_plugins(settings: Settings) -> None:
    """Import RATCHET_PLUGINS modules; importing them registers their tools and profiles."""
    for name in settings.plugin_modules:
        try:
            importlib.import_module(name)
        except ImportError as exc:
            raise SettingsError(f"RATCHET_PLUGINS: cannot import {name!r}: {exc}") from None
        except (
            ValidationError
        ) as exc:  # a profile or a tool it declares is not one (an approval rule that does not parse)
            raise SettingsError(
                f"RATCHET_PLUGINS: {name!r} declares an invalid {exc.title}: {'; '.join(problems(exc))}"
            ) from None


@dataclass(frozen=True, kw_only=True)
class RatchetOptions:
    """What `RatchetPlugin` wires. Build it with `from_settings`, giving the fields you replace."""

    settings: Settings
    """Worker settings: the default model provider, workspace root, local tools, search attributes,
    secrets to redact, tracing (`ratchet.ops.settings`; RATCHET_* and TEMPORAL_* variables). Each model
    provider reads its own (OPENAI_*, ANTHROPIC_*: `ratchet.models.settings`)."""
    ledger: Ledger
    """Idempotency ledger of side effects (`ratchet.stores.ledger.Ledger`); default: the store at
    RATCHET_LEDGER_URL (`ratchet.stores.urls.open_ledger`: `SqliteLedger` at RATCHET_LEDGER_PATH when
    unset, `PostgresLedger` for postgresql://). Every worker of a task queue must see the same ledger."""
    artifacts: ArtifactStore
    """Content-addressed blob store for transcripts, tool outputs, snapshots and offloaded large
    payloads (`ratchet.stores.artifacts.ArtifactStore`); default: the store at
    RATCHET_ARTIFACT_URL (`ratchet.stores.urls.open_artifacts`: `DirectoryArtifactStore` at
    RATCHET_ARTIFACT_DIR when unset, `ObjectArtifactStore` for s3://, gs:// and az://). Every
    worker, and every client that reads large results, must reach it."""
    profiles: ProfileRegistry
    """Agent profiles a run can name; default: `builtin_profiles()` (with RATCHET_PLUGINS' profiles)."""
    tools: ToolRegistry
    """Tools the profiles can use; default: `builtin_tools()` (with RATCHET_PLUGINS' tools)."""
    providers: ProviderRegistry
    """Model providers a run's `model.provider` (or its profile's `provider`, or RATCHET_PROVIDER) can
    name; default: `builtin_providers(artifacts)`: `openai` (OPENAI_API_KEY / OPENAI_BASE_URL, ...) and
    `scripted`, each with its settings from the environment. The secrets of a provider's `settings`
    are redacted like the worker's own."""
    data_converter: DataConverter
    """Converter of every payload: Ratchet's pydantic JSON, then encryption (RATCHET_CODEC_KEYS)
    and offload of large payloads to `artifacts` (RATCHET_CLAIM_CHECK_BYTES); default:
    `ratchet.payloads.converter.data_converter(settings, artifacts)`. Clients and workers of a
    namespace must agree on it."""
    sandbox: Sandbox
    """Where programs the agent runs run: `run_command`, the verifier, tools declared `runs_code`
    (`ratchet.sandbox.Sandbox`); default: the backend RATCHET_SANDBOX names (`nsjail`, or `off`).
    It is probed when the options are built: if it cannot run here, it is an `UnavailableSandbox`
    and `tools` leaves out the code-running tools (`usable_sandbox`)."""
    mcp: McpPool = dataclasses.field(default_factory=McpPool)
    """The MCP servers this worker may start or reach, one pooled connection each (`ratchet.mcp.pool`);
    default: the servers of the RATCHET_MCP_SERVERS file (none when unset). Their `${NAME}`
    variables join the secret list. Closed when a worker running on these options stops."""
    billing: BillingStore | None = None
    """The billing ledger: a row per model attempt, in the ledger's database (`ratchet.stores.billing`);
    default: the database at RATCHET_LEDGER_URL, unless a `ledger` of your own is given (then give its
    billing store too). None: attempts are not billed (the bench's baseline), and budgets charge only
    the replies' usage."""

    @classmethod
    def from_settings(
        cls,
        settings: Settings | None = None,
        *,
        ledger: Ledger | None = None,
        artifacts: ArtifactStore | None = None,
        profiles: ProfileRegistry | None = None,
        tools: ToolRegistry | None = None,
        providers: ProviderRegistry | None = None,
        data_converter: DataConverter | None = None,
        sandbox: Sandbox | None = None,
        mcp: McpPool | None = None,
        billing: BillingStore | None = None,
    ) -> RatchetOptions:
        """Options with every field not given built from `settings` (default: the environment,
        `load_settings()`). Imports the RATCHET_PLUGINS modules first, so their tools and profiles
        are registered. The only place Ratchet builds its default backends."""
        settings = settings if settings is not None else load_settings()
        load_plugins(settings)
        artifacts = artifacts if artifacts is not None else open_artifacts(settings.artifact_store_url)
        sandbox, tools = usable_sandbox(
            sandbox if sandbox is not None else open_sandbox(settings.sandbox),
            tools if tools is not None else builtin_tools(),
        )
        return cls(
            settings=settings,
            ledger=ledger if ledger is not None else open_ledger(settings.ledger_store_url),
            artifacts=artifacts,
            profiles=profiles if profiles is not None else builtin_profiles(),
            tools=tools,
            sandbox=sandbox,
            providers=providers if providers is not None else builtin_providers(artifacts),
            data_converter=data_converter if data_converter is not None else converter_for(settings, artifacts),
            mcp=mcp_pool(settings, mcp),
            billing=billing
            if billing is not None or ledger is not None
            else BillingStore.open(settings.ledger_store_url),
        )


def usable_sandbox(sandbox: Sandbox, tools: ToolRegistry) -> tuple[Sandbox, ToolRegistry]:
    """`sandbox` and `tools` if the sandbox runs here (its probe runs `true` in it). If not: an
    `UnavailableSandbox` saying why (the verifier fails with it) and `tools` without the tools
    declared `runs_code`, so a run of a profile that names one is refused at its start."""
    try:
        sandbox.probe()
    except SandboxUnavailable as exc:
        refused = sorted(t.name for t in tools.tools.values() if t.runs_code)
        log.error(
            "the %s sandbox cannot run programs here: %s. Not offering %s; verifiers will fail. "
            "Fix the cause, or set RATCHET_SANDBOX=off to run them unconfined (docs/SECURITY.md)",
            sandbox.name,
            exc,
            ", ".join(refused) or "no tool",
        )
        return UnavailableSandbox(f"the {sandbox.name} sandbox cannot run here: {exc}"), tools.without_code_runners()
    return sandbox, tools


def mcp_pool(settings: Settings, given: McpPool | None = None) -> McpPool:
    """`given`, or a pool of the RATCHET_MCP_SERVERS file's servers (SettingsError naming the file
    and server); their `${NAME}` variables join the secret list."""
    if given is None:
        try:
            given = McpPool(load_servers(settings.mcp_servers) if settings.mcp_servers is not None else [])
        except McpConfigError as exc:
            raise SettingsError(str(exc)) from None
    if given.servers and importlib.util.find_spec("mcp") is None:
        raise SettingsError("MCP servers are configured but the MCP SDK is missing: pip install 'ratchet-agents[mcp]'")
    name_secret_variables(given.secret_variables())
    return given
