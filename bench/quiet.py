"""Was the machine quiet while a section ran? The CPU that other programs took, and steal time.

A bench figure compares Ratchet with the raw-SDK floor in the same run, but a ratio still moves
when other work shares the cores: Ratchet's fewer server round trips hide its CPU cost on a
loaded machine (a throughput ratio of 1.59 on a loaded machine was 0.9 on a quiet one). So each
section records, from /proc, the CPU the rest of the machine used while it ran: the machine's
busy time minus the time of the bench's own process tree (the bench, its dev server, its
workers, py-spy, the store servers), and the hypervisor's steal time. A section is comparable
when other work took under `FOREIGN_CORES_MAX` cores on average and steal stayed under
`STEAL_MAX`; a throughput section also needs the floor at `FLOOR_MIN_SHARE` of its quiet figure.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

TICKS = os.sysconf("SC_CLK_TCK")
FOREIGN_CORES_MAX = 0.25
"""Other programs' CPU, in cores on average over the section, above which it is not comparable."""
STEAL_MAX = 0.05
"""The hypervisor's steal time, as a share of all CPU time, above which it is not comparable."""
FLOOR_MIN_SHARE = 0.7
"""A throughput section's floor below this share of the floor's quiet figure is not comparable."""


@dataclass(frozen=True)
class Reading:
    at: float
    busy_s: float
    steal_s: float
    all_s: float
    mine_s: float
    load: tuple[float, ...]


def _machine() -> tuple[float, float, float]:
    """(busy, steal, all) CPU seconds since boot, over every core."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    user, nice, system, idle, iowait, irq, softirq, steal = (fields + [0] * 8)[:8]
    busy = user + nice + system + irq + softirq
    return busy / TICKS, steal / TICKS, (busy + idle + iowait + steal) / TICKS


def _stat(pid: int | str) -> list[str] | None:
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text[text.rindex(")") + 2 :].split()  # fields from the state on (the name may hold spaces)


def tree_cpu_s(root: int) -> float:
    """CPU seconds of `root` and every live descendant, with the children each of them reaped."""
    parents: dict[int, int] = {}
    times: dict[int, float] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        stat = _stat(entry)
        if stat is None:
            continue
        pid = int(entry)
        parents[pid] = int(stat[1])  # ppid; utime, stime, cutime, cstime are fields 14-17 of stat
        times[pid] = sum(int(x) for x in stat[11:15]) / TICKS
    mine, total = {root}, 0.0
    for pid in sorted(times):  # a child's pid can be lower than its parent's after wrap-around: walk up
        seen, at = [], pid
        while at not in mine and at in parents and at not in seen and at > 1:
            seen.append(at)
            at = parents[at]
        if at in mine:
            mine.update(seen)
    for pid in mine:
        total += times.get(pid, 0.0)
    return total


def read(root: int | None = None) -> Reading:
    busy, steal, all_s = _machine()
    return Reading(time.monotonic(), busy, steal, all_s, tree_cpu_s(root or os.getpid()), os.getloadavg())


def between(before: Reading, after: Reading) -> dict[str, Any]:
    """What the machine did between two readings: the bench's cores, other programs' cores, steal."""
    wall = max(after.at - before.at, 1e-6)
    busy, mine = after.busy_s - before.busy_s, after.mine_s - before.mine_s
    all_s = max(after.all_s - before.all_s, 1e-6)
    return {
        "wall_s": round(wall, 2), "bench_cores": round(mine / wall, 2),
        "foreign_cores": round(max(busy - mine, 0.0) / wall, 2),
        "steal_share": round((after.steal_s - before.steal_s) / all_s, 3), "load": [round(x, 2) for x in after.load],
    }


def probe(seconds: float) -> dict[str, Any]:
    """Other programs' CPU over `seconds` while the bench is idle (before a section starts)."""
    first = read()
    time.sleep(seconds)
    return between(first, read())


def verdict(during: dict[str, Any]) -> tuple[bool, str]:
    """(comparable, why not) for a section's `between` reading."""
    if during["foreign_cores"] > FOREIGN_CORES_MAX:
        return False, f"other programs took {during['foreign_cores']:.2f} cores (> {FOREIGN_CORES_MAX})"
    if during["steal_share"] > STEAL_MAX:
        return False, f"steal time {during['steal_share']:.0%} (> {STEAL_MAX:.0%})"
    return True, ""


def floor_verdict(floor_steps_per_s: float, quiet_floor: float | None) -> tuple[bool, str]:
    """A throughput section's floor against the floor's figure from the last quiet run."""
    if quiet_floor and floor_steps_per_s < FLOOR_MIN_SHARE * quiet_floor:
        return False, (f"the floor made {floor_steps_per_s:.1f} steps/s, under {FLOOR_MIN_SHARE:.0%} of its quiet "
                       f"{quiet_floor:.1f}")
    return True, ""
