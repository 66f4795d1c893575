"""`ratchet schedule create | list | show | pause | resume | trigger | backfill | delete`: runs, or
a session's messages, started by time on Temporal Schedules, over `RatchetClient.schedules`
(ratchet/client/schedules.py).

The same schedules with the plain Temporal CLI: `temporal schedule list`, `temporal schedule
describe --schedule-id NAME`, `temporal schedule trigger --schedule-id NAME`. This module imports
only argparse at the top: `ratchet --help` stays cheap.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from ratchet.cli.verbs import connected, seconds, trailing_words

EXAMPLES = {
    "create": "schedule create triage --cron '0 7 * * 1-5' coder 'triage new issues'",
    "list": "schedule list --json",
    "show": "schedule show triage",
    "pause": "schedule pause triage --note 'holiday'",
    "resume": "schedule resume triage",
    "trigger": "schedule trigger triage",
    "backfill": "schedule backfill triage --from 2026-12-01T00:00:00Z --to 2026-12-03T00:00:00Z",
    "delete": "schedule delete triage",
}


def arguments(cmd: argparse.ArgumentParser) -> None:
    sub = cmd.add_subparsers(dest="schedule_command", required=True, metavar="SUBCOMMAND", help="what to do")
    create = sub.add_parser("create", help="a new schedule: when, and the run (or session message) each firing starts")
    create.add_argument("name", help="the schedule's name (its runs are NAME-<time>)")
    when = create.add_mutually_exclusive_group(required=True)
    when.add_argument("--cron", help="a cron line, e.g. '0 7 * * 1-5' (UTC unless --time-zone)")
    when.add_argument("--every", help="an interval: 90s, 15m, 1h, 1d")
    trailing_words(create, "AGENT OBJECTIVE", "the profile each firing runs and the run's objective")
    create.add_argument("--file", type=Path, help="the run's input as JSON (instead of AGENT OBJECTIVE)")
    create.add_argument("--session", help="send --text to this session at each firing (instead of a run)")
    create.add_argument("--text", help="with --session: the message")
    create.add_argument(
        "--overlap",
        default="skip",
        help="while the last firing's run is open: skip (default), "
        "buffer_one, buffer_all, cancel_other, terminate_other, allow_all",
    )
    create.add_argument("--catchup", help="firings missed while the server was down run late within this (1h)")
    create.add_argument("--jitter", help="each firing up to this much late, at random (5m)")
    create.add_argument("--time-zone", help="the cron line's IANA time zone (Europe/Paris)")
    create.add_argument("--paused", action="store_true", help="create it paused")
    create.add_argument("--note", default="", help="a note shown with it")
    listing = sub.add_parser("list", help="every schedule: when, what, next and latest firings with their phases")
    listing.add_argument("--json", action="store_true", help="as JSON")
    show = sub.add_parser("show", help="one schedule, with its latest firings")
    show.add_argument("name")
    show.add_argument("--json", action="store_true", help="as JSON")
    parsers = {"create": create, "list": listing, "show": show}
    for verb, what in (("pause", "stop firing"), ("resume", "fire again"), ("trigger", "fire once now")):
        parsers[verb] = sub.add_parser(verb, help=what)
        parsers[verb].add_argument("name")
        if verb != "trigger":
            parsers[verb].add_argument("--note", default="", help="why (shown with the schedule)")
    backfill = parsers["backfill"] = sub.add_parser("backfill", help="fire for every time between two instants")
    backfill.add_argument("name")
    backfill.add_argument("--from", dest="start", required=True, help="ISO time, e.g. 2026-12-01T00:00:00Z")
    backfill.add_argument("--to", dest="end", required=True, help="ISO time (included)")
    parsers["delete"] = sub.add_parser("delete", help="delete it (its runs go on)")
    parsers["delete"].add_argument("name")
    for verb, parser in parsers.items():
        parser.epilog = "example: ratchet " + EXAMPLES[verb]


async def schedule(args: argparse.Namespace) -> int:
    return await SUBCOMMANDS[args.schedule_command](args)


def _seconds(text: str | None, what: str) -> float | None:
    if text is None:
        return None
    try:
        return seconds(text)
    except ValueError as exc:
        raise ValueError(f"{what}: {exc}") from None


def request(args: argparse.Namespace) -> dict[str, Any]:
    """The ScheduleRequest's fields from the command line (the client validates them); a usage
    error exits 2 under the verb's usage line."""
    try:
        return _fields(args)
    except ValueError as exc:
        args.verb_parser.error(str(exc))
        raise  # not reached: error() exits


def _fields(args: argparse.Namespace) -> dict[str, Any]:
    fields: dict[str, Any] = {"name": args.name, "overlap": args.overlap, "paused": args.paused, "note": args.note}
    fields.update(cron=args.cron, every_s=_seconds(args.every, "--every"), time_zone=args.time_zone)
    fields.update(catchup_window_s=_seconds(args.catchup, "--catchup"), jitter_s=_seconds(args.jitter, "--jitter") or 0)
    targets = [args.session is not None, args.file is not None, bool(args.words)]
    if sum(targets) != 1:
        raise ValueError("give AGENT OBJECTIVE, --file run.json or --session ID --text TEXT")
    if args.session is not None:
        fields.update(session_id=args.session, text=args.text)
    elif args.file is not None:
        try:
            fields["run"] = json.loads(args.file.read_text())
        except (OSError, ValueError) as exc:
            raise ValueError(f"--file {args.file}: {exc}") from None
    else:
        if len(args.words) != 2:
            raise ValueError(f"give AGENT OBJECTIVE (two words, the objective quoted), not {args.words}")
        fields["run"] = {"agent": args.words[0], "objective": args.words[1]}
    return {k: v for k, v in fields.items() if v is not None}


async def create(args: argparse.Namespace) -> int:
    fields = request(args)  # a usage error before any connection
    info = await (await connected()).schedules.create(fields)
    print(f"schedule {info.name} created: {info.when} -> {info.target}" + (" (paused)" if info.paused else ""))
    if info.next_runs:
        print(f"next: {info.next_runs[0].isoformat()}")
    return 0


async def list_(args: argparse.Namespace) -> int:
    found = await (await connected()).schedules.list()
    if args.json:
        print(json.dumps([s.model_dump(mode="json") for s in found], indent=2))
        return 0
    rows = [("NAME", "WHEN", "STATE", "NEXT", "LAST", "TARGET")]
    for s in found:
        last = s.recent[-1] if s.recent else None
        last_text = f"{last.workflow_id} {last.phase or last.status or '?'}" if last else "-"
        nxt = s.next_runs[0].strftime("%Y-%m-%d %H:%M:%SZ") if s.next_runs and not s.paused else "-"
        rows.append((s.name, s.when, "paused" if s.paused else "active", nxt, last_text, s.target))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]) - 1)]
    for row in rows:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths)) + "  " + row[-1])
    return 0


async def show(args: argparse.Namespace) -> int:
    info = await (await connected()).schedules.describe(args.name)
    if info is None:
        print(
            f"ratchet schedule: {args.name} is not a Ratchet schedule (its action starts another workflow)",
            file=sys.stderr,
        )
        return 2
    if args.json:
        print(info.model_dump_json(indent=2))
        return 0
    print(f"{info.name}: {info.when} -> {info.target}; {'paused' if info.paused else 'active'}, overlap {info.overlap}")
    if info.note:
        print(f"note: {info.note}")
    print(f"fired {info.fired}, missed {info.missed}, skipped by overlap {info.skipped}")
    for t in info.next_runs:
        print(f"next  {t.isoformat()}")
    for r in info.recent:
        print(f"fired {r.scheduled_at.isoformat()}  {r.workflow_id}  {r.phase or r.status or '?'}")
    return 0


async def _change(args: argparse.Namespace) -> int:
    schedules = (await connected()).schedules
    if args.schedule_command == "pause":
        await schedules.pause(args.name, args.note)
    elif args.schedule_command == "resume":
        await schedules.resume(args.name, args.note)
    elif args.schedule_command == "trigger":
        await schedules.trigger(args.name)
    else:
        await schedules.delete(args.name)
    print(f"schedule {args.name}: {args.schedule_command} done")
    return 0


async def backfill(args: argparse.Namespace) -> int:
    from datetime import UTC, datetime

    try:
        start, end = (datetime.fromisoformat(t) for t in (args.start, args.end))
        start, end = (t if t.tzinfo else t.replace(tzinfo=UTC) for t in (start, end))  # naive: UTC
    except ValueError as exc:
        print(f"ratchet schedule backfill: {exc}", file=sys.stderr)
        return 2
    info = await (await connected()).schedules.backfill(args.name, start, end)
    print(f"schedule {info.name}: backfilled {start.isoformat()} .. {end.isoformat()}")
    return 0


SUBCOMMANDS = {
    "create": create,
    "list": list_,
    "show": show,
    "pause": _change,
    "resume": _change,
    "trigger": _change,
    "delete": _change,
    "backfill": backfill,
}
