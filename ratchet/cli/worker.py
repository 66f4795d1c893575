"""`ratchet worker` and `ratchet config`: run a worker, and show the settings it reads."""

from __future__ import annotations

import argparse
import json
import sys


def worker(args: argparse.Namespace) -> int:
    from ratchet.worker.main import main as worker_main

    worker_main()
    return 0


def config(args: argparse.Namespace) -> int:
    from ratchet.models.builtin import provider_settings
    from ratchet.ops.settings import load_settings

    shown = load_settings().masked()  # with the effective Temporal connection; a bad setting: main says it
    shown["providers"] = {name: found.masked() for name, found in provider_settings().items()}
    print(json.dumps(shown, indent=2))
    if shown.get("sandbox") == "off":
        from ratchet.sandbox.choose import UNCONFINED_WARNING

        print(f"ratchet: WARNING: {UNCONFINED_WARNING}", file=sys.stderr)
    return 0
