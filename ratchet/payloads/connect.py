"""`connect`: a Temporal client for the settings' connection that speaks Ratchet's payloads.

The connection is Temporal's environment configuration (`Settings.temporal_connection`: its env
config, TEMPORAL_CONFIG_FILE / TEMPORAL_PROFILE and the TEMPORAL_* variables); the client gets the
settings' data converter (ratchet/payloads/converter.py) and tracing, or a plugin that brings its
own (the worker's `RatchetPlugin`). Here, beside the converter, rather than in ratchet.ops beneath
it, so the client and the CLI connect without importing the worker side or pointing ops up.
"""

from __future__ import annotations

from temporalio.client import Client, Plugin
from temporalio.runtime import Runtime

from ratchet.ops.connection import open_client
from ratchet.ops.settings import Settings
from ratchet.ops.tracing import tracing_interceptors
from ratchet.payloads.converter import data_converter


async def connect(settings: Settings, runtime: Runtime | None = None, *, plugin: Plugin | None = None) -> Client:
    """A client for settings' Temporal connection (`Settings.temporal_connection`; raises
    SettingsError naming a bad variable). With `plugin`, the client carries it: its data converter
    and tracing, and every worker built on the client runs Ratchet. Without, the client gets the
    settings' data converter and tracing only (the CLI's case: no ledger, no plugin modules).
    `runtime`: the worker's Temporal runtime when it serves metrics. A service it cannot reach:
    TemporalUnreachable (ratchet/ops/connection.py), one line naming the address."""
    connection = settings.temporal_connection()
    if plugin is not None:
        return await open_client(connection, plugins=[plugin], runtime=runtime)
    return await open_client(
        connection,
        data_converter=data_converter(settings),
        interceptors=tracing_interceptors(settings),
        runtime=runtime,
    )
