"""`ratchet shadow`: what a candidate profile, model or prompt would have done on recorded runs, every
side effect quarantined, over `RatchetClient.shadows` (ratchet/client/shadows.py).

    ratchet shadow --runs 'RatchetAgent="coder"' --model recorded --fail-if 'verifier_worse>0'
    ratchet shadow report BATCH --json
    ratchet shadow clean BATCH

Exit status: 0, 1 when a `--fail-if` criterion holds (each one printed), 2 for bad input (nothing
started).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from ratchet.cli.verbs import connected

EXIT_FAIL_IF = 1
EXIT_BAD_INPUT = 2


async def shadow(args: argparse.Namespace) -> int:
    if args.shadow_command == "report":
        return await report(args)
    if args.shadow_command == "clean":
        cleaned = await (await connected()).shadows.clean(args.batch)
        for one in cleaned:
            removed = f", its workspace removed on {', '.join(one.removed_on)}" if one.removed_on else ""
            lost = f"; host {', '.join(one.lost)} gone: its copy of the workspace stays" if one.lost else ""
            print(f"deleted {one.workflow_id}: {one.ledger_entries} ledger entries{removed}{lost}")
        print(f"deleted {len(cleaned)} shadow runs of batch {args.batch}")
        return 0
    return await start(args)


async def start(args: argparse.Namespace) -> int:
    from ratchet.client.shadows import Candidate

    if not args.runs:
        print("ratchet shadow: give --runs (a visibility query, or workflow ids)", file=sys.stderr)
        return EXIT_BAD_INPUT
    try:
        criteria = _criteria(args.fail_if)
        candidate = Candidate(
            profile=args.profile,
            model=args.model,
            model_options=_json_object(args.model_options),
            bisect=args.bisect,
            set=settings_given(args.set or []),
            from_checkpoint=args.from_checkpoint,
            budget_usd=args.budget_usd,
        )
    except ValueError as exc:
        print(f"ratchet shadow: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    client = await connected()
    runs: str | list[str] = args.runs[0] if len(args.runs) == 1 and _is_query(args.runs[0]) else args.runs
    batch = await client.shadows.start(runs, candidate, concurrency=args.concurrency)
    print(f"shadow batch {batch.id}: {len(batch.pairs)} runs", file=sys.stderr)
    if args.no_wait:
        return 0
    return _print(await client.shadows.report(batch, wait_s=args.wait), args.json, criteria)


async def report(args: argparse.Namespace) -> int:
    try:
        criteria = _criteria(args.fail_if)
    except ValueError as exc:
        print(f"ratchet shadow report: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    found = await (await connected()).shadows.report(args.batch, wait_s=args.wait)
    return _print(found, args.json, criteria)


def _print(found, as_json: bool, criteria: list) -> int:
    from ratchet.client.shadow_report import broken, markdown

    print(found.model_dump_json(indent=2) if as_json else markdown(found))
    failed = broken(found, criteria) if criteria else []
    for reason in failed:
        print(f"ratchet shadow: fail-if: {reason}", file=sys.stderr)
    return EXIT_FAIL_IF if failed else 0


def _criteria(text: str | None) -> list:
    from ratchet.client.shadow_report import parse_fail_if

    return parse_fail_if(text) if text else []


def _json_object(text: str | None) -> dict[str, Any]:
    if not text:
        return {}
    try:
        found = json.loads(text)
    except ValueError as exc:
        raise ValueError(f"--model-options: not JSON ({exc})") from None
    if not isinstance(found, dict):
        raise ValueError("--model-options: give a JSON object")
    return found


def _is_query(text: str) -> bool:
    return any(c in text for c in "=<> ")


def settings_given(pairs: list[str]) -> dict[str, Any]:
    """`field=value` pairs: `@path` reads the value from a file, a JSON value is taken as JSON, any
    other text as a string."""
    found: dict[str, Any] = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not name:
            raise ValueError(f"--set {pair!r}: give field=value (or field=@file)")
        if value.startswith("@"):
            try:
                found[name] = Path(value[1:]).read_text(encoding="utf-8")
            except OSError as exc:
                raise ValueError(f"--set {name}: cannot read {value[1:]!r}: {exc.strerror}") from None
            continue
        try:
            found[name] = json.loads(value)
        except ValueError:
            found[name] = value
    return found
