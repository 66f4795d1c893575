"""The Findings section: what the numbers of this run say, computed from them (no fixed numbers)."""

from __future__ import annotations

from typing import Any

from bench.steps import cell_medians


def _row(cells: list[dict[str, Any]], variant: str, n: int | None = None) -> dict[str, float] | None:
    med = cell_medians(cells or [])
    ns = sorted({k[1] for k in med if k[0] == variant})
    if not ns:
        return None
    return med.get((variant, n if n is not None else ns[-1]))


def _fields(cells: list[dict[str, Any]], variant: str = "ratchet") -> list[tuple[str, float]]:
    mine = [c for c in cells or [] if c["variant"] == variant and c.get("fields")]
    if not mine:
        return []
    last = max(mine, key=lambda c: c["steps"])
    return list(last["fields"].items())


def findings(results: dict[str, Any], figures: dict[str, float]) -> list[str]:
    out: list[str] = []
    cells = results.get("step_cost") or []
    floor, ratchet, local = _row(cells, "floor"), _row(cells, "ratchet"), _row(cells, "local")
    if floor and ratchet:
        out.append(
            f"- **Where a step's time goes.** Floor: {floor['ms_per_step']:.0f} ms/step wall, "
            f"{floor['server_cpu_ms_per_step']:.0f} ms dev-server CPU, {floor['cpu_ms_per_step']:.0f} ms worker CPU. "
            f"Ratchet: {ratchet['ms_per_step']:.0f} ms wall, {ratchet['server_cpu_ms_per_step']:.0f} ms server CPU, "
            f"{ratchet['cpu_ms_per_step']:.0f} ms worker CPU. Server CPU per step exceeds worker CPU for both: on this "
            f"machine the server's round trips, not Ratchet's Python, bound a step; Ratchet's extra worker CPU shows "
            f"in the worker_cpu_ratio and at scale.")
    if ratchet and local:
        out.append(
            f"- **Local activities for fast read-only tools** (bench/prototypes.py, `LocalToolsAgentWorkflow`): "
            f"events/step {ratchet['events_per_step']:.1f} -> {local['events_per_step']:.1f}, server CPU/step "
            f"{ratchet['server_cpu_ms_per_step']:.0f} -> {local['server_cpu_ms_per_step']:.0f} ms, wall "
            f"{ratchet['ms_per_step']:.0f} -> {local['ms_per_step']:.0f} ms/step (step_time_ratio_local="
            f"{figures.get('step_time_ratio_local', 0):.2f}). Change: in workflows/agent.py `_execute_tool`, call "
            f"`workflow.execute_local_activity` for `spec.effect == READ_ONLY` tools with `timeout_s <= 10` and no "
            f"heartbeat (same activity name and input, so the worker needs no change), behind "
            f"`workflow.patched(...)` so recorded histories still replay; keep regular activities for everything "
            f"else. Note the cache-eviction caveat in `_prepare`'s comment: a pending local activity "
            f"holds the workflow task, so keep the timeout bound short.")
    if floor and ratchet:
        prof = {p["variant"]: p for p in results.get("profile") or []}
        per_run = ""
        if "ratchet" in prof:
            steps, _ = results["config"]["profile"]
            ms = prof["ratchet"]["by_category"].get("sandbox imports (new run)", 0.0) * steps
            per_run = f" Re-importing workflows/agent.py into a fresh sandbox costs about {ms:.0f} ms of worker CPU per run."
        out.append(
            f"- **Start of a run.** From start to the first model call: Ratchet {ratchet['prepare_ms']:.0f} ms, floor "
            f"{floor['prepare_ms']:.0f} ms: `run.prepare` is one more activity round trip (schedule, run, workflow "
            f"task). cold_start_ratio={figures.get('cold_start_ratio', 0):.2f}.{per_run} Making `run.prepare` a local "
            f"activity (it is fast and idempotent: content-addressed writes) would remove the round trip; the "
            f"comment in `_prepare` explains why it is not one today (a local activity pending across a cache "
            f"eviction stalls the task), which a short start_to_close_timeout bounds.")
    comp = results.get("components") or []
    base = _row(comp, "ratchet")
    if base:
        parts = []
        for name, what in (("ledger", "compensable tool through the ledger"), ("verify", "+ verify/checkpoint"),
                           ("no_sa", "search-attribute upserts off"), ("unsandboxed", "AgentWorkflow outside the sandbox"),
                           ("local_unsandboxed", "local read-only tools + no sandbox")):
            row = _row(comp, name)
            if row:
                parts.append(f"{what}: {row['ms_per_step_min'] - base['ms_per_step_min']:+.0f} ms/step wall (best rep), "
                             f"{row['cpu_ms_per_step'] - base['cpu_ms_per_step']:+.1f} ms worker CPU")
        out.append("- **Pieces, against plain Ratchet in the same cells** — " + "; ".join(parts) + ". Wall deltas "
                   "smaller than ~15 ms are within this machine's noise; the worker CPU deltas are the reliable part.")
    if floor and ratchet:
        top = ", ".join(f"`{k}` {v:.0f} B" for k, v in _fields(cells)[:8])
        out.append(
            f"- **History bytes.** {ratchet['bytes_per_step']:.0f} B/step vs the floor's {floor['bytes_per_step']:.0f} "
            f"(events/step {ratchet['events_per_step']:.1f} vs {floor['events_per_step']:.1f}). Largest fields per step: "
            f"{top}. Every model request repeats `settings` (with `script_ref`) and `tools_ref`, both constant for "
            f"the run; every ArtifactRef spells out a 64-hex digest, its size and its media type; pydantic writes "
            f"every `None`/default field (`tool_calls: []`, `content_ref: null`, ...).")
    sweep = sorted(results.get("sweep") or [], key=lambda c: c["agents"])
    if sweep:
        best = max(sweep, key=lambda c: c["steps_per_s"])
        out.append(
            f"- **Scale.** Throughput peaks at {best['agents']} concurrent agents ({best['steps_per_s']:.1f} steps/s); "
            f"beyond it steps only queue (p50 step latency {sweep[-1]['p50_step_ms'] / 1000:.1f} s at "
            f"{sweep[-1]['agents']} agents). At the peak the dev server spends {best['server_cpu_ms_per_step']:.0f} ms "
            f"CPU per step and the worker {best['cpu_ms_per_step']:.0f} ms, i.e. "
            f"{(best['server_cpu_ms_per_step'] + best['cpu_ms_per_step']) * best['steps_per_s'] / 1000:.1f} of the "
            f"machine's {results['meta']['cores']} cores, shared with the other load: fewer server round trips per "
            f"step (local activities) and less worker CPU per step are what raise it.")
    cached = [c for c in (results.get("cached"), results.get("cached_unsandboxed")) if c]
    if cached:
        parts = ", ".join(f"{c.get('variant', 'ratchet')} {c['kib_per_run']:.0f} KiB" for c in cached)
        out.append(
            f"- **Memory per cached run** (a run waiting on a timer): {parts}. Each sandboxed run holds its own "
            f"re-imported copy of workflows/agent.py and the sandbox's module proxies, besides its `AgentState`.")
    micro = [r for r in results.get("micro") or [] if "steps" in r]
    if micro:
        first, last = micro[0], micro[-1]
        out.append(
            f"- **Transcript cost grows with the run.** In-process, one `model.call` costs {first['model_call_ms']:.1f} ms "
            f"at {first['steps']} steps and {last['model_call_ms']:.0f} ms at {last['steps']} steps (transcript "
            f"{last['transcript_kib']:.0f} KiB: read+validate {last['transcript_read_ms']:.0f} ms, write+fsync "
            f"{last['transcript_write_ms']:.0f} ms), all on the worker's event loop, so every other run on the worker waits.")
    replay = (results.get("long") or {}).get("replay")
    if replay:
        parts = ", ".join(f"{k} {v['events_per_s']:.0f}" for k, v in replay.items() if isinstance(v, dict))
        gain = replay["unsandboxed"]["events_per_s"] / replay["ratchet"]["events_per_s"] if "unsandboxed" in replay else 0
        out.append(
            f"- **Replay** ({replay['steps']} steps, events/s): {parts}. Replay is CPU in the Python SDK per workflow "
            f"activation; outside the sandbox the same code replays {gain:.1f}x faster (each payload of each command is visited three times "
            f"by the SDK's CommandAwarePayloadVisitor, and in the sandbox every visit runs "
            f"`get_serialization_context` through `exec`; the `summary=` of every activity is one more payload). "
            f"`@workflow.defn(sandboxed=False)` on AgentWorkflow is the largest single lever, with "
            f"determinism then guarded by the replay tests alone.")
    long = (results.get("long") or {}).get("long")
    if long:
        stopped = "" if long.get("completed", True) else f" (of {long['steps']}: the time budget ran out)"
        out.append(
            f"- **Long run.** {long['steps_done']} steps{stopped} in {long['runs']} runs: RSS ratio {long['rss_ratio']:.2f}, "
            f"history bytes per run ratio {long['history_ratio']:.2f}, run input (before claim check) ratio "
            f"{long['input_ratio']:.2f} ({long['run_input_first'] / 1024:.0f} -> {long['run_input_last'] / 1024:.0f} KiB), "
            f"ms/step ratio {long['step_ms_ratio']:.2f}. The continue-as-new input carries the whole `AgentState`: "
            f"`messages` and `tool_calls` from step 1, and the run input with its script.")
    return out
