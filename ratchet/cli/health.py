"""`ratchet health`: can this process reach what a worker needs? Exit 0 if so, 1 if not.

The checks, with the worker's settings (RATCHET_*, TEMPORAL_*), each bounded by `--timeout`:
- temporal: connect and describe the namespace (it exists, the credentials are good);
- ledger: open it (RATCHET_LEDGER_URL: a Postgres ledger connects and creates its tables) and read;
- artifacts: open the store (RATCHET_ARTIFACT_URL) and write one small blob (content-addressed, so
  the same blob every time): the store is there and writable;

One line per check. docker-compose.yml's worker healthcheck runs it.
"""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import Awaitable, Callable

from temporalio.api.workflowservice.v1 import DescribeNamespaceRequest
from ratchet.ops.connection import TemporalUnreachable
from ratchet.ops.settings import Settings, SettingsError, load_settings, mask_url

PROBE_BLOB = b"ratchet health check\n"


async def _temporal(settings: Settings) -> str:
    from ratchet.ops.connection import open_client

    connection = settings.temporal_connection()
    client = await open_client(connection)
    await client.workflow_service.describe_namespace(DescribeNamespaceRequest(namespace=client.namespace))
    return f"{connection.address}, namespace {client.namespace!r}"


def _ledger(settings: Settings) -> str:
    from ratchet.stores.urls import open_ledger

    open_ledger(settings.ledger_store_url).get("ratchet-health-check")
    return mask_url(settings.ledger_store_url)


def _artifacts(settings: Settings) -> str:
    from ratchet.stores.urls import open_artifacts

    open_artifacts(settings.artifact_store_url).put(PROBE_BLOB, "text/plain")
    return mask_url(settings.artifact_store_url)


CHECKS: dict[str, Callable[[Settings], Awaitable[str] | str]] = {
    "temporal": _temporal,
    "ledger": _ledger,
    "artifacts": _artifacts,
}


async def _check(name: str, settings: Settings, timeout: float) -> bool:
    check = CHECKS[name]
    try:
        if asyncio.iscoroutinefunction(check):
            where = await asyncio.wait_for(check(settings), timeout)
        else:  # the stores' clients block: in a thread, so the timeout still holds
            where = await asyncio.wait_for(asyncio.to_thread(check, settings), timeout)
    except TimeoutError:
        print(f"FAIL {name}: no answer in {timeout:g}s", flush=True)
        return False
    except TemporalUnreachable as exc:  # its message says it all
        print(f"FAIL {name}: {exc}", flush=True)
        return False
    except Exception as exc:  # any failure is the answer: say which check and why
        print(f"FAIL {name}: {type(exc).__name__}: {' '.join(str(exc).split())[:300]}", flush=True)
        return False
    print(f"ok   {name}: {where}", flush=True)
    return True


async def _all(settings: Settings, timeout: float) -> bool:
    return all(await asyncio.gather(*(_check(name, settings, timeout) for name in CHECKS)))


def main(args: argparse.Namespace) -> int:
    try:
        settings = load_settings()
    except SettingsError as exc:
        print(f"FAIL settings: {exc}", flush=True)
        return 1
    # Not asyncio.run: it would wait for a store call that timed out in its thread; the caller
    # ends the process (`exit_now`) and those threads with it.
    loop = asyncio.new_event_loop()
    return 0 if loop.run_until_complete(_all(settings, args.timeout)) else 1
