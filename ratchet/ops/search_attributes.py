"""The search attributes runs publish (declared in ratchet/contracts/search_attributes.py, upserted by
workflows/visibility.py), checked when a worker starts.

A run that upserts an attribute its namespace does not know fails its workflow task, and Temporal
retries that task forever: the run hangs, silently. So a worker (RatchetPlugin.run_worker) checks
the namespace first: missing attributes are registered where the worker may (a dev server, a
self-hosted cluster with operator rights); where it may not, the worker stops with the exact
commands that register them. `RATCHET_SEARCH_ATTRIBUTES=false` turns publishing (and the check) off.
"""

from __future__ import annotations

import logging

from temporalio.api.enums.v1 import IndexedValueType
from temporalio.api.operatorservice.v1 import AddSearchAttributesRequest, ListSearchAttributesRequest
from temporalio.client import Client
from temporalio.service import RPCError

from ratchet.contracts import AttributeType, RunAttributes
from ratchet.ops.settings import SettingsError

SEARCH_ATTRIBUTES: dict[str, AttributeType] = {a.name: a.type for a in RunAttributes.ALL}
"""Name -> type (its value as `temporal operator search-attribute create --type` spells it)."""

_INDEXED = {
    AttributeType.KEYWORD: IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD,
    AttributeType.BOOL: IndexedValueType.INDEXED_VALUE_TYPE_BOOL,
    AttributeType.INT: IndexedValueType.INDEXED_VALUE_TYPE_INT,
    AttributeType.DOUBLE: IndexedValueType.INDEXED_VALUE_TYPE_DOUBLE,
}
log = logging.getLogger("ratchet.worker")


class SearchAttributesMissing(SettingsError):
    """The namespace lacks Ratchet's search attributes and this worker may not register them."""


def register_commands(namespace: str, names: list[str] | None = None) -> list[str]:
    """One `temporal operator search-attribute create` per attribute: the CLI's dev server takes
    only the first of several `--name`s in one command."""
    return [
        f"temporal operator search-attribute create --namespace {namespace}"
        f" --name {name} --type {SEARCH_ATTRIBUTES[name]}"
        for name in (names or list(SEARCH_ATTRIBUTES))
    ]


async def ensure_search_attributes(client: Client) -> list[str]:
    """Register the attributes the namespace lacks; returns their names (empty: all were there).
    Raises SearchAttributesMissing, with the commands to run, when they cannot be registered."""
    service, namespace = client.operator_service, client.namespace
    try:
        known = await service.list_search_attributes(ListSearchAttributesRequest(namespace=namespace))
    except RPCError as exc:  # e.g. a Cloud API key without operator rights: say what to check
        log.warning(
            "could not list the search attributes of namespace %r (%s); runs hang if %s are missing",
            namespace,
            exc.message,
            ", ".join(SEARCH_ATTRIBUTES),
        )
        return []
    present = {**known.system_attributes, **known.custom_attributes}
    wrong = [n for n, kind in SEARCH_ATTRIBUTES.items() if n in present and present[n] != _INDEXED[kind]]
    if wrong:
        raise SearchAttributesMissing(
            f"namespace {namespace!r} has {', '.join(wrong)} with another type than Ratchet publishes "
            f"({', '.join(f'{n}={SEARCH_ATTRIBUTES[n]}' for n in wrong)}); remove and re-create them, or set "
            "RATCHET_SEARCH_ATTRIBUTES=false"
        )
    missing = [n for n in SEARCH_ATTRIBUTES if n not in present]
    if not missing:
        return []
    request = AddSearchAttributesRequest(
        namespace=namespace, search_attributes={n: _INDEXED[SEARCH_ATTRIBUTES[n]] for n in missing}
    )
    try:
        await service.add_search_attributes(request)
    except RPCError as exc:
        commands = "\n  ".join(register_commands(namespace, missing))
        raise SearchAttributesMissing(
            f"namespace {namespace!r} lacks the search attributes {', '.join(missing)} and this worker may not "
            f"register them ({exc.message}). Register them once (add --address, or run them in the "
            f"admin-tools container):\n  {commands}\nOn Temporal Cloud add them in the namespace's settings. "
            "Or set RATCHET_SEARCH_ATTRIBUTES=false: runs then publish none."
        ) from None
    log.info("registered search attributes %s on namespace %r", ", ".join(missing), namespace)
    return missing
