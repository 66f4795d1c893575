"""`ratchet users add NAME --role approver | list | remove NAME`: people's API tokens, for the
console, `ratchet serve` and programs (`Authorization: Bearer <token>`), kept hashed in the
ledger's database (ratchet/client/people.py over ratchet/stores/users.py)."""

from __future__ import annotations

import argparse
import json
from datetime import UTC, datetime


def arguments(cmd: argparse.ArgumentParser) -> None:
    sub = cmd.add_subparsers(dest="users_command", required=True, metavar="SUBCOMMAND", help="what to do")
    add = sub.add_parser("add", help="a person with roles; prints their token once")
    add.add_argument("name", help="who (their subject: a decision they make is recorded as theirs)")
    add.add_argument("--role", action="append", default=[], help="a role (repeat for more), e.g. approver")
    listing = sub.add_parser("list", help="everyone, with their roles")
    listing.add_argument("--json", action="store_true", help="as JSON")
    remove = sub.add_parser("remove", help="a person and their token (refused from the next request on)")
    remove.add_argument("name")


def users(args: argparse.Namespace) -> int:
    from ratchet.client.people import UserError, people
    from ratchet.ops.settings import load_settings

    store = people(load_settings())
    try:
        if args.users_command == "add":
            token = store.add(args.name, args.role)
            print(f"{args.name} ({', '.join(sorted(set(args.role))) or 'no roles'}): their token, shown only now:")
            print(token)
        elif args.users_command == "remove":
            store.remove(args.name)
            print(f"removed {args.name}: their token is refused from now on")
        else:
            _list(store.everyone(), args.json)
    except UserError as exc:
        print(f"ratchet users: {exc}")
        return 2
    return 0


def _list(everyone: list, as_json: bool) -> None:
    if as_json:
        print(json.dumps([{"name": u.name, "roles": list(u.roles), "created_at": u.created_at} for u in everyone]))
        return
    if not everyone:
        print("nobody yet: ratchet users add NAME --role approver")
    for user in everyone:
        made = datetime.fromtimestamp(user.created_at, UTC).strftime("%Y-%m-%d %H:%M UTC")
        print(f"{user.name}\t{','.join(user.roles) or '-'}\t{made}")
