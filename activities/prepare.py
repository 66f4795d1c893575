"""`run.prepare`: resolve a run's profile, tools and model settings on the worker, once per run."""

from __future__ import annotations

import asyncio
import hashlib
import json

from pydantic import ValidationError
from temporalio import activity
from temporalio.client import Client
from temporalio.exceptions import ApplicationError

from ratchet.contracts.activities import PREPARE
from ratchet.contracts.decisions import schema_digest
from ratchet.stores.ledger import Ledger
from . import caller
from .mcp import McpActivities, PinnedTools
from ratchet.mcp.catalog import McpTool
from .workspace import confine, open_workspace
from ratchet.stores.artifacts import ArtifactStore, put_json
from ratchet.contracts import (
    AgentRun,
    Budget,
    ErrorType,
    ModelCallConfig,
    ModelChoice,
    ModelSettings,
    OutputSpec,
    PlanRun,
    PrepareRun,
    SessionPolicy,
    RunPlan,
    ToolSpec,
    Verifier,
    problems,
)
from ratchet.contracts.handoff import inbox_problem, is_inbox
from ratchet.core import outputs, prices
from ratchet.core.outputs import OutputTypes, default_output_types
from ratchet.core.profiles import AgentProfile, ProfileRegistry
from ratchet.models.provider import PlanContext, ProviderOptionsError, ProviderRegistry
from ratchet.ops.settings import Settings
from ratchet.core.tools import Tool, ToolError, ToolRegistry, runs_locally


class RunPreparer:
    def __init__(
        self,
        settings: Settings,
        profiles: ProfileRegistry,
        tools: ToolRegistry,
        providers: ProviderRegistry,
        artifacts: ArtifactStore,
        ledger: Ledger | None = None,
        mcp: McpActivities | None = None,
        client: Client | None = None,
        output_types: OutputTypes = default_output_types,
    ) -> None:
        self.output_types = output_types
        """The pydantic models a run's or profile's `output_schema` may name."""
        self.client = client
        self.mcp = mcp
        """Lists the MCP servers a profile uses (ratchet/mcp); None: this worker has none."""
        self.providers = providers
        self.ledger = ledger
        self.settings = settings
        self.prices = prices.from_settings(settings.prices_file)
        self.profiles = profiles
        self.tools = tools
        self.artifacts = artifacts

    @activity.defn(name=PREPARE.name)
    async def prepare(self, req: PlanRun) -> RunPlan:
        """The plan of the run this is the first activity of. The run is read from the run's start
        event, not sent again as this activity's input: a scripted run's script (or a long
        objective) is in history once."""
        run = await self._start_input()
        if req.agent is not None:  # a handoff (workflows/handoffs.py): the same run under another profile
            run = run.model_copy(update={"agent": req.agent})
        try:
            return await self.plan(PrepareRun(run=run, workflow_id=req.workflow_id, chain=req.chain))
        except ApplicationError as exc:
            if not exc.non_retryable:
                raise
            # the run fails unplanned: the workflow learns here whether it may publish its search attributes
            raise ApplicationError(
                exc.message, {"search_attributes": self.settings.search_attributes}, type=exc.type, non_retryable=True
            ) from None

    async def _start_input(self) -> AgentRun:
        assert self.client is not None, "run.prepare needs a Temporal client (to read the run's start input)"
        info = activity.info()
        handle = self.client.get_workflow_handle(caller.workflow_id(), run_id=info.workflow_run_id)
        async for event in handle.fetch_history_events(page_size=1):
            payloads = event.workflow_execution_started_event_attributes.input.payloads
            [run] = await self.client.data_converter.decode(payloads[:1], [AgentRun])
            return run
        raise ApplicationError(
            f"run {info.workflow_id} has no history", type=ErrorType.INVALID_INPUT, non_retryable=True
        )

    async def plan(self, req: PrepareRun) -> RunPlan:
        """The plan for `req.run`: its profile, tools (MCP tool lists pinned) and model settings."""
        profile = self.profiles.get(req.run.agent)
        if profile is not None and profile.mcp and self.mcp is None:
            no_mcp = f"profile {profile.name!r} uses MCP servers; this worker runs none"
            raise ApplicationError(no_mcp, type=ErrorType.INVALID_PROFILE, non_retryable=True)
        mcp_tools = await self.mcp.discover(profile) if self.mcp is not None and profile is not None else []
        return await asyncio.to_thread(self._plan, req, mcp_tools)

    def _profile_problem(self, profile: AgentProfile) -> str | None:
        """Why a run cannot be planned on this profile here, or None."""
        missing = [name for name in profile.tools if name not in self.tools.tools]
        if missing:
            return f"names tools this worker lacks: {missing}"
        for guard in profile.guardrails:
            broken = outputs.compiled(json.dumps(guard.json_schema, sort_keys=True)) if guard.json_schema else None
            if isinstance(broken, str):
                return f"guardrail {guard.name!r}: json_schema does not compile: {broken}"
        inboxes = [problem for problem in map(inbox_problem, profile.handoffs) if problem]
        if inboxes:
            return f"handoffs: {inboxes[0]}"
        unknown = [name for name in profile.handoffs if not is_inbox(name) and self.profiles.get(name) is None]
        if unknown:
            return f"handoffs {unknown} are not profiles of this worker (nor person:NAME or role:NAME inboxes)"
        if ("handoff" in profile.tools) != bool(profile.handoffs):
            return "the handoff tool and `handoffs` (its targets) go together"
        if profile.context_messages is not None and profile.context_messages < 2:
            return f"context_messages must be at least 2, not {profile.context_messages}"
        return None

    def _plan(self, req: PrepareRun, mcp_tools: list[McpTool]) -> RunPlan:
        """In a thread: the ledger's claim and the artifact puts may be remote round trips, which
        must not hold the worker's event loop."""
        profile = self.profiles.get(req.run.agent)
        if profile is None:
            known = ", ".join(sorted(self.profiles.profiles)) or "none"
            raise ApplicationError(
                f"agent: unknown profile {req.run.agent!r}; this worker has: {known}",
                type=ErrorType.INVALID_INPUT,
                non_retryable=True,
            )
        profile = _changed(profile, req.run)
        problem = self._profile_problem(profile)
        if problem is not None:
            raise ApplicationError(
                f"profile {profile.name!r}: {problem}", type=ErrorType.INVALID_PROFILE, non_retryable=True
            )
        tools = [self.tools.get(name) for name in profile.tools]
        model = self._model_settings(profile, req)
        fallbacks = [
            self._other_model(req, model, choice, f"profile {profile.name!r}: fallbacks.{i}")
            for i, choice in enumerate(profile.fallbacks)
        ]
        self._claim(req)
        local_ok = self._local_tools
        mcp = self.mcp.pinned(mcp_tools, local_ok, {t.name for t in tools}) if self.mcp is not None else PinnedTools()
        call = ModelCallConfig(
            settings=model,
            tools=[t.tool_schema() for t in tools] + mcp.schemas,
            output=self._output(profile, req),
            fallbacks=fallbacks,
            agent=profile.name,
            shadow=req.run.shadow is not None,
            tenant=req.run.tenant or "",
            daily_cap_usd=self.settings.tenant_daily_cap(req.run.tenant),
        )
        return RunPlan(
            agent=profile.name,
            system_prompt=profile.system_prompt,
            model=model,
            fallbacks=fallbacks,
            judges=self._judges(profile, req, model),
            tools=_with_schema_digests([_spec(t, local_ok) for t in tools] + mcp.specs, call),
            call_ref=put_json(self.artifacts, call.model_dump(mode="json")).digest,
            mcp_ref=mcp.ref,
            budget=_budget(profile.budget, req),
            workspace=req.run.workspace or _workspace_from_id(req.workflow_id),
            search_attributes=self.settings.search_attributes,
            local_activities=local_ok,
            fairness_weight=self.settings.tenant_weight(req.run.tenant),
            approver_keys=self.settings.trusted_keys,
            decision_leeway_s=self.settings.decision_leeway_s,
            **{**profile.policy(), "session": _session(profile, req), "verifier": _verifier(profile, tools, req)},
        )

    def _claim(self, req: PrepareRun) -> None:
        """The run's id for its chain in the ledger: a reused id's earlier entries set aside."""
        if self.ledger is not None and req.chain:
            previous = self.ledger.claim(req.workflow_id, req.chain)
            if previous is not None:
                reused = "workflow id %s was used before (chain %s): its ledger entries were set aside"
                activity.logger.info(reused, req.workflow_id, previous)

    @property
    def _local_tools(self) -> bool:
        """Not on a worker without a workflow cache: evicting a run after every task cancels its
        local activities and the task waits out its timeout (10 s) before the next try."""
        return self.settings.local_tools and self.settings.max_cached_workflows > 0

    def _model_settings(self, profile: AgentProfile, req: PrepareRun) -> ModelSettings:
        """The run's provider and model (the run's, else the profile's, else the worker's default
        provider and that provider's default model), the provider's options resolved by it."""
        override = req.run.model
        named = profile.provider or self.settings.provider
        name = override.provider if override is not None and override.provider else named
        provider = self.providers.get(name)
        if provider is None:
            known = ", ".join(sorted(self.providers.providers))
            where = (
                "model.provider"
                if name != named
                else ("profile's provider" if profile.provider else "RATCHET_PROVIDER")
            )
            raise _invalid(f"model: unknown provider {name!r} ({where}); this worker has: {known}")
        settings = ModelSettings(
            provider=name,
            model=(profile.model if name == named else None) or provider.default_model,
            timeout_s=profile.model_timeout_s or self.settings.model_timeout_s,
            max_attempts=profile.model_max_attempts or self.settings.model_max_attempts,
            temperature=profile.temperature,
            context_messages=profile.context_messages,
            tool_output_chars=profile.tool_output_chars,
            stream=profile.stream,
        )
        options: dict = {}
        if override is not None:
            options = override.options or {}
            settings = settings.model_copy(
                update=override.model_dump(exclude_none=True, exclude={"provider", "options"})
            )
        context = PlanContext(
            artifacts=self.artifacts, read_workspace_file=lambda path, limit: self._read(req, path, limit)
        )
        try:
            settings = provider.plan(settings, options, context)
        except ProviderOptionsError as exc:
            raise _invalid(f"model.options.{exc}" if exc.option else f"model.options: {exc}") from None
        settings = self._priced(settings, profile)
        problem = provider.unavailable(settings)
        if problem is not None:
            raise _invalid(f"model: {problem}")
        return settings.model_copy(update={"task_queue": self.settings.model_task_queue(name)})

    def _priced(self, settings: ModelSettings, given: AgentProfile | ModelChoice) -> ModelSettings:
        """The model's prices: the profile's (or the fallback's) own where it sets them, else the price
        table's (ratchet/core/prices.py); a model with neither is unpriced (billed $0, cost unknown)."""
        own = {f: getattr(given, f) for f in PRICE_FIELDS if getattr(given, f, None) is not None}
        price = self.prices.price(settings.provider, settings.model) if not own else None
        table = price.per_1k() if price is not None else {}
        per_1k = {f: own.get(f, table.get(f)) for f in PRICE_FIELDS}
        for field in PRICE_FIELDS[:2]:
            per_1k[field] = per_1k[field] or 0.0
        return settings.model_copy(update={**per_1k, "priced": bool(own) or price is not None})

    def _judges(self, profile: AgentProfile, req: PrepareRun, primary: ModelSettings) -> dict[str, ModelSettings]:
        """Each judge guardrail's model settings, by the guardrail's name."""
        return {
            g.name: self._other_model(
                req,
                primary,
                ModelChoice(provider=g.judge.provider, model=g.judge.model, options=g.judge.options),
                f"profile {profile.name!r}: guardrail {g.name!r}: judge",
            ).model_copy(update={"stream": False})
            for g in profile.guardrails
            if g.judge is not None
        }

    def _other_model(self, req: PrepareRun, primary: ModelSettings, choice: ModelChoice, where: str) -> ModelSettings:
        """A fallback's (or a judge's) settings: the run's, with its provider, model, options and prices."""
        provider = self.providers.get(choice.provider)
        if provider is None:
            known = ", ".join(sorted(self.providers.providers))
            raise _invalid(f"{where}.provider: unknown provider {choice.provider!r}; this worker has: {known}")
        settings = primary.model_copy(
            update={"provider": choice.provider, "model": choice.model or provider.default_model, "options": {}}
        )
        settings = self._priced(settings, choice)
        context = PlanContext(
            artifacts=self.artifacts, read_workspace_file=lambda path, limit: self._read(req, path, limit)
        )
        try:
            settings = provider.plan(settings, choice.options, context)
        except ProviderOptionsError as exc:
            raise _invalid(f"{where}.options.{exc}" if exc.option else f"{where}.options: {exc}") from None
        problem = provider.unavailable(settings)
        if problem is not None:
            raise _invalid(f"{where}: {problem}")
        return settings.model_copy(update={"task_queue": self.settings.model_task_queue(choice.provider)})

    def _output(self, profile: AgentProfile, req: PrepareRun) -> OutputSpec | None:
        """The run's output schema (the run's, else the profile's), resolved and checked."""
        given, field = (
            (req.run.output_schema, "output_schema")
            if req.run.output_schema is not None
            else (
                profile.output_schema,
                f"profile {profile.name!r}: output_schema",
            )
        )
        if given is None:
            return None
        try:
            return outputs.resolve(given, self.output_types)
        except ValueError as exc:
            kind = ErrorType.INVALID_INPUT if field == "output_schema" else ErrorType.INVALID_PROFILE
            raise ApplicationError(f"{field}: {exc}", type=kind, non_retryable=True) from None

    def _read(self, req: PrepareRun, relative: str, limit: int) -> str:
        """A file in the run's workspace, for a provider's options (the scripted provider's script_file)."""
        try:
            workspace = open_workspace(
                self.settings.workspace_root, req.run.workspace or _workspace_from_id(req.workflow_id)
            )
            path = confine(workspace, relative)
            if path.stat().st_size > limit:
                raise ProviderOptionsError(None, f"{relative!r} is over {limit:,} bytes")
            return path.read_text(encoding="utf-8")
        except ToolError as err:
            raise ProviderOptionsError(None, str(err)) from None
        except FileNotFoundError:
            raise ProviderOptionsError(None, f"{relative!r} is not in the run's workspace") from None
        except (OSError, UnicodeDecodeError) as err:
            raise ProviderOptionsError(None, f"cannot read {relative!r}: {err}") from None


def _changed(profile: AgentProfile, run: AgentRun) -> AgentProfile:
    """The profile with a shadow's candidate changes (`AgentRun.shadow.profile`), validated again."""
    change = run.shadow.profile if run.shadow is not None else None
    if change is None:
        return profile
    fields = change.model_dump(exclude_none=True)
    try:
        return AgentProfile.model_validate({**profile.model_dump(), **fields})
    except ValidationError as exc:
        raise _invalid(f"shadow.profile: {'; '.join(problems(exc))}") from None


PRICE_FIELDS = (
    "usd_per_1k_prompt_tokens",
    "usd_per_1k_completion_tokens",
    "usd_per_1k_cache_read_tokens",
    "usd_per_1k_cache_write_tokens",
)


def _invalid(message: str) -> ApplicationError:
    return ApplicationError(message, type=ErrorType.INVALID_INPUT, non_retryable=True)


def _spec(tool: Tool, local_ok: bool) -> ToolSpec:
    spec = tool.spec()
    spec.local = local_ok and runs_locally(spec)
    return spec


def _budget(default: Budget, req: PrepareRun) -> Budget:
    if req.run.budget is None:
        return default
    return default.model_copy(update=req.run.budget.model_dump(exclude_none=True))


def _verifier(profile: AgentProfile, tools: list[Tool], req: PrepareRun) -> Verifier | None:
    """The run's verifier over the profile's; a run may name one only if its profile runs programs."""
    given = req.run.verifier
    if given is None:
        return profile.verifier
    if not any(t.runs_code for t in tools):
        raise _invalid(
            f"verifier: profile {profile.name!r} runs no programs (no tool of it is declared runs_code), "
            "so a run of it cannot name a verifier; a profile's verifier is set where it is registered"
        )
    timeout = given.timeout_s or (profile.verifier or Verifier(argv=given.argv)).timeout_s
    return Verifier(argv=given.argv, timeout_s=timeout)


def _workspace_from_id(workflow_id: str) -> str:
    """The workflow id when it is a plain directory name; else a readable prefix and a hash of the
    whole id, so two ids never share a workspace (`team/x` and `team_x` did)."""
    cleaned = "".join(c if c.isascii() and (c.isalnum() or c in "_.-") else "_" for c in workflow_id).lstrip("._-")
    if cleaned == workflow_id and len(cleaned) <= 100:
        return cleaned
    digest = hashlib.sha256(workflow_id.encode("utf-8", "surrogatepass")).hexdigest()[:12]
    return f"{cleaned[:80] or 'workspace'}-{digest}"


def _session(profile: AgentProfile, req: PrepareRun) -> SessionPolicy | None:
    """The run's session settings: the run's `session` over the profile's; None: not a session."""
    if req.run.session is None:
        return profile.session
    return req.run.session.applied_to(profile.session)


def _with_schema_digests(specs: list[ToolSpec], call: ModelCallConfig) -> list[ToolSpec]:
    """Each tool with the digest of its schema as the model is told of it (a decision's proof covers it)."""
    digests = {t.name: schema_digest(t.model_dump(mode="json")) for t in call.tools}
    return [s.model_copy(update={"schema_digest": digests.get(s.name)}) for s in specs]
