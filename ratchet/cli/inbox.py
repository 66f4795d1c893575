"""`ratchet inbox` and `ratchet respond`: runs handed to a person, and the person's answer.

The same with the plain CLI:
    temporal workflow list --query 'RatchetHandedTo="person:alice"'
    temporal workflow update execute --workflow-id W --name respond \
        --input '{"action": "hand_back", "to": "fixer", "text": "use the v2 API", "by": "alice"}'
"""

from __future__ import annotations

import argparse

from ratchet.cli.verbs import connected
from ratchet.client import InboxItem, InvalidInput, Refused


async def inbox(args: argparse.Namespace) -> int:
    items = await (await connected()).inbox(person=args.person, role=args.role, limit=args.limit)
    for item in items:
        print(shown(item))
    if not items:
        print(
            "(nothing handed to "
            + (f"person:{args.person}" if args.person else f"role:{args.role}" if args.role else "anyone")
            + ")"
        )
    return 0


def shown(item: InboxItem) -> str:
    """One run of the inbox: the handoff record, as a person reads it."""
    h = item.handoff
    lines = [
        f"{item.workflow_id}: handed to {h.to_agent} by {h.from_agent} at step {h.step} ({h.at})",
        f"  objective: {h.objective}",
        f"  summary: {h.summary}",
    ]
    for title, values in (
        ("evidence", h.evidence),
        ("decision", h.decisions),
        ("constraint", h.constraints),
        ("open question", h.open_questions),
    ):
        lines += [f"  {title}: {value}" for value in values]
    lines.append(
        f"  answer: ratchet respond {item.workflow_id} --finish|--reply TEXT | --hand-back {h.from_agent} --notes TEXT"
    )
    return "\n".join(lines)


async def respond(args: argparse.Namespace) -> int:
    if args.hand_back and not args.notes:
        print("--hand-back needs --notes: what the agent is told")
        return 2
    action, text = (
        ("finish", args.finish)
        if args.finish is not None
        else ("reply", args.reply)
        if args.reply is not None
        else ("hand_back", args.notes)
    )
    run = (await connected()).get(args.workflow_id)
    try:
        print(
            await run.respond(
                action, text, to=args.hand_back, constraints=args.constraint, open_questions=args.question, by=args.by
            )
        )
    except (Refused, InvalidInput) as exc:
        print(exc)
        return 1
    return 0
