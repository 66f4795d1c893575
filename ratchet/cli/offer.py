"""`ratchet profiles | tools`: what a worker with this environment offers (RATCHET_PLUGINS and
RATCHET_MCP_SERVERS read as the worker reads them): its agent profiles and its tools, with their
effect classes, undo and reconcile hooks, approval rules and MCP servers."""

from __future__ import annotations

import argparse
import json
import sys


def _offer():
    from ratchet.mcp.config import McpConfigError, load_servers
    from ratchet.ops.settings import SettingsError, load_settings
    from ratchet.plugin import builtin_profiles, builtin_tools, load_plugins

    try:
        settings = load_settings()
        load_plugins(settings)
        servers = load_servers(settings.mcp_servers) if settings.mcp_servers is not None else []
    except (SettingsError, McpConfigError) as exc:
        print(f"ratchet: {exc}", file=sys.stderr)
        return None
    return builtin_profiles(), builtin_tools(), servers


def profiles(args: argparse.Namespace) -> int:
    offer = _offer()
    if offer is None:
        return 2
    registry, tools, _ = offer
    shown = []
    for profile in sorted(registry.profiles.values(), key=lambda p: p.name):
        rules = [
            f"{r.tool}" + (f" when {r.argument} ~ /{r.pattern}/" if r.argument else "") for r in profile.approval_rules
        ]
        waits = rules + [
            f"{name} (irreversible)"
            for name in profile.tools
            if name in tools.tools
            and tools.tools[name].effect == "irreversible"
            and name not in profile.allow_irreversible
        ]
        shown.append(
            {
                "name": profile.name,
                "tools": profile.tools,
                "mcp": [{"server": t.server, "tools": t.tools or "all it lists"} for t in profile.mcp],
                "approval": waits,
                "auto_approve": [rule.label() for rule in profile.auto_approve],
                "verifier": " ".join(profile.verifier.argv) if profile.verifier else None,
                "budget": profile.budget.model_dump(exclude_none=True),
                "failure_policy": str(profile.failure_policy),
                "model": f"{profile.provider or 'RATCHET_PROVIDER'}/{profile.model or 'its default model'}",
                "fallbacks": [f"{c.provider}/{c.model or 'its default'}" for c in profile.fallbacks],
                "output_schema": profile.output_schema
                if isinstance(profile.output_schema, str)
                else ("a JSON Schema" if profile.output_schema else None),
            }
        )
    if args.json:
        print(json.dumps(shown, indent=2))
        return 0
    for p in shown:
        print(
            f"{p['name']}: tools {', '.join(p['tools']) or '-'}"
            + "".join(
                f"; mcp {m['server']} ({m['tools'] if isinstance(m['tools'], str) else ', '.join(m['tools'])})"
                for m in p["mcp"]
            )
        )
        print(
            f"  model: {p['model']}"
            + (f", then {', '.join(p['fallbacks'])}" if p["fallbacks"] else "")
            + (f"   answers: {p['output_schema']}" if p["output_schema"] else "")
        )
        print(f"  waits for approval: {'; '.join(p['approval']) or 'never'}")
        if p["auto_approve"]:
            print(f"  unless a rule approves: {'; '.join(p['auto_approve'])}")
        print(
            f"  verifier: {p['verifier'] or '-'}   failure policy: {p['failure_policy']}   budget: "
            + ", ".join(f"{k} {v}" for k, v in p["budget"].items())
        )
    return 0


def tools(args: argparse.Namespace) -> int:
    offer = _offer()
    if offer is None:
        return 2
    _, registry, servers = offer
    shown = [
        {
            "name": t.name,
            "effect": str(t.effect),
            "kind": t.kind,
            "workspace": t.workspace,
            "runs_code": t.runs_code,
            "undo": t.undo is not None,
            "reconcile": t.reconcile is not None,
            "idempotent": t.idempotent,
            "timeout_s": t.timeout_s,
            "description": t.description.splitlines()[0] if t.description else "",
        }
        for t in sorted(registry.tools.values(), key=lambda t: t.name)
    ]
    mcp = [
        {"server": s.name, "transport": s.transport, "local": s.local, "max_attempts": s.max_attempts} for s in servers
    ]
    if args.json:
        print(json.dumps({"tools": shown, "mcp_servers": mcp}, indent=2))
        return 0
    print(f"{'tool':<16} {'effect':<13} {'undo':<5} {'reconcile':<9} {'where':<10} description")
    for t in shown:
        where = (
            "workspace"
            if t["workspace"]
            else ("child run" if t["kind"] == "child" else ("timer" if t["kind"] == "timer" else "-"))
        )
        print(
            f"{t['name']:<16} {t['effect']:<13} {'yes' if t['undo'] else '-':<5} {'yes' if t['reconcile'] else '-':<9} "
            f"{where:<10} {t['description'][:70]}"
        )
    for s in mcp:
        print(
            f"mcp server {s['server']} ({s['transport']}{', local' if s['local'] else ''}): its tools are listed "
            "when a run is planned and pinned for the run (`<server>__<tool>`)"
        )
    return 0
