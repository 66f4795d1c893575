"""The results file, written as each section finishes: bench/results/latest.json and latest.md.

The file holds the latest result of every section, each with where it came from (`sections`:
when, by which command, how long, how busy the machine was, whether its figures are comparable)
and a failed section's traceback. A run replaces the sections it measured and leaves the others
as they were, so `--only X` re-measures X, and a bench that dies keeps what it finished. A failed
section's old result is dropped, not left standing beside a failure that says it is stale.
"""

from __future__ import annotations

import json
import traceback
from pathlib import Path
from typing import Any

from bench import quiet
from bench.report import compute_figures, markdown
from bench.sections import SECTIONS, Record


def load(out: Path) -> dict[str, Any]:
    path = out / "latest.json"
    return json.loads(path.read_text()) if path.exists() else {}


def start(doc: dict[str, Any], meta: dict[str, Any], cfg: dict[str, Any]) -> dict[str, Any]:
    """The document a new bench invocation writes into: the old sections kept, its meta new."""
    kept = {k: v for k, v in doc.get("meta", {}).items() if k in ("variants", "component_steps", "headline_agents",
                                                                  "quiet_floor_steps_per_s")}
    return {**doc, "meta": {**kept, **meta}, "config": cfg, "sections": dict(doc.get("sections", {}))}


def _comparable(doc: dict[str, Any], record: Record) -> tuple[bool, str]:
    ok, why = quiet.verdict(record.during)
    if ok and record.section.name == "throughput":
        cells = record.result or []  # the floor at the first size: the quiet figure is that size's
        floor = [c["steps_per_s"] for c in cells  # side by side, a cell's steps/s is a share of the machine
                 if c["variant"] == "floor" and c["agents"] == cells[0]["agents"] and not c.get("together")]
        if floor:
            ok, why = quiet.floor_verdict(min(floor), doc["meta"].get("quiet_floor_steps_per_s"))
            if ok:
                doc["meta"]["quiet_floor_steps_per_s"] = round(max(floor), 2)
    return ok, why


def add(doc: dict[str, Any], record: Record) -> None:
    """Put one section's record into the document."""
    section, meta = record.section, doc["meta"]
    entry = {"status": "ok" if record.ok else "failed", "date": meta["date"], "command": meta["command"],
             "duration_s": round(record.duration_s, 1), "before": record.before, "during": record.during}
    if record.ok:
        doc[section.results_key] = record.result
        for key in section.meta:
            meta[key] = doc["config"][key]
        entry["comparable"], entry["why"] = _comparable(doc, record)
    else:
        doc.pop(section.results_key, None)
        entry["traceback"] = record.failure
    doc["sections"][section.name] = entry


def figure_sections(doc: dict[str, Any]) -> dict[str, str]:
    """Each figure's section (a figure is comparable when its section is)."""
    owner: dict[str, str] = {}
    for section in SECTIONS:
        if doc.get(section.results_key):
            alone = {"meta": doc["meta"], section.results_key: doc[section.results_key]}
            owner.update({name: section.name for name in compute_figures(alone) if name != "wft_timeouts_total"})
    return owner


def drop_unreadable(doc: dict[str, Any]) -> None:
    """Each section's stored results whose figures this bench cannot compute (an earlier bench's
    format: a field it did not record) are dropped, the section marked failed saying so, rather
    than stopping the bench at its next write."""
    for section in SECTIONS:
        if not doc.get(section.results_key):
            continue
        try:
            compute_figures({"meta": doc["meta"], section.results_key: doc[section.results_key]})
        except Exception:  # noqa: BLE001 - whatever the old format breaks, the section is re-measured
            doc.pop(section.results_key)
            entry = doc["sections"].get(section.name, {})
            doc["sections"][section.name] = {
                **entry, "status": "failed", "comparable": False,
                "traceback": "its stored results (from " + str(entry.get("date", "an earlier bench")) + ") cannot be "
                "read by this bench; run the section again\n" + traceback.format_exc(),
            }


def write(doc: dict[str, Any], out: Path) -> dict[str, float]:
    """latest.json, latest.md and the plots from the document as it is now; returns its figures."""
    from bench.plots import plot_all

    out.mkdir(parents=True, exist_ok=True)
    doc.setdefault("sections", {})
    drop_unreadable(doc)
    figures = compute_figures(doc)
    doc["figures"] = figures
    owners = figure_sections(doc)
    doc["not_comparable"] = sorted(name for name, section in owners.items()
                                   if not doc["sections"].get(section, {}).get("comparable", True))
    plots = [p.name for p in plot_all(doc, out)]
    tmp = out / "latest.json.tmp"
    tmp.write_text(json.dumps(doc, indent=1, default=str))
    tmp.replace(out / "latest.json")
    (out / "latest.md").write_text(markdown(doc, figures, plots))
    return figures


def failed(doc: dict[str, Any], names: list[str]) -> list[str]:
    return [n for n in names if doc["sections"].get(n, {}).get("status") == "failed"]
