"""`remember`, `recall`, `forget`: memory across runs, scoped by the run's `memory_scope` (e.g. a
user id), in the ledger's database (ratchet/stores/memory.py). A write is an effect with an undo:
rolling back a turn forgets what it remembered (and brings back what it forgot)."""

from __future__ import annotations

from pydantic import BaseModel, Field

from ratchet.core.tools import FatalToolError, ToolContext, ToolError, ToolOutput, tool, undo_for, undo_record
from ratchet.stores.memory import MemoryStore
from ratchet.stores.urls import ledger_path


class RememberArgs(BaseModel):
    key: str = Field(min_length=1, max_length=200, description="What the memory is about (e.g. 'preferred language').")
    value: str = Field(min_length=1, max_length=10_000, description="What to remember.")


class RecallArgs(BaseModel):
    query: str = Field("", max_length=200, description="Text in the key or value; empty: everything (up to 20).")


class ForgetArgs(BaseModel):
    key: str = Field(min_length=1, max_length=200)


def _scoped(ctx: ToolContext) -> tuple[MemoryStore, str]:
    """The store and the run's scope (a run without one is told so)."""
    if ctx.memory_scope is None:
        raise ToolError("this run has no memory_scope: start it with one to remember across runs")
    return _store(ctx), ctx.memory_scope


def _store(ctx: ToolContext) -> MemoryStore:
    """The ledger's database: Postgres (RATCHET_LEDGER_URL, shared by the hosts) or the SQLite file."""
    settings = ctx.settings
    if settings is None:
        raise FatalToolError("the memory tools need the worker's settings (the ledger's database)")
    url = settings.ledger_store_url
    return MemoryStore.sqlite(ledger_path(url)) if url.startswith("sqlite") else MemoryStore.postgres(url)


@tool(effect="compensable", timeout_s=30, idempotent=True)
def remember(ctx: ToolContext, args: RememberArgs) -> ToolOutput:
    """Remember a fact for later runs of the same memory scope (it replaces what `key` held)."""
    store, scope = _scoped(ctx)
    previous = store.write(ctx.key, scope, args.key, args.value)
    undo = undo_record(f"forget {args.key!r}" if previous is None else f"restore {args.key!r}", call=ctx.key)
    return ToolOutput(f"remembered {args.key!r}", undo=undo)


@undo_for("remember")
def undo_remember(ctx: ToolContext, args: RememberArgs, undo: dict | None) -> str:
    _store(ctx).undo((undo or {}).get("call") or ctx.key.removesuffix("/undo"))
    return f"undid remembering {args.key!r}"


@tool(effect="read_only", timeout_s=30)
def recall(ctx: ToolContext, args: RecallArgs) -> str:
    """What this memory scope holds (keys and values containing `query`)."""
    store, scope = _scoped(ctx)
    found = store.recall(scope, args.query)
    return "\n".join(f"{key}: {value}" for key, value in found) or "nothing remembered"


@tool(effect="compensable", timeout_s=30, idempotent=True)
def forget(ctx: ToolContext, args: ForgetArgs) -> ToolOutput:
    """Forget what `key` held."""
    store, scope = _scoped(ctx)
    previous = store.write(ctx.key, scope, args.key, None)
    return ToolOutput(
        f"forgot {args.key!r}" if previous is not None else f"nothing was remembered under {args.key!r}",
        undo=undo_record(f"remember {args.key!r} again", call=ctx.key),
    )


@undo_for("forget")
def undo_forget(ctx: ToolContext, args: ForgetArgs, undo: dict | None) -> str:
    _store(ctx).undo((undo or {}).get("call") or ctx.key.removesuffix("/undo"))
    return f"undid forgetting {args.key!r}"
