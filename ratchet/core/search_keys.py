"""The SDK's typed key of each of a run's search attributes (declared once, with their types, in
ratchet/contracts/search_attributes.py): built here for the workflow that upserts them and for
everything that starts, lists or judges runs by them."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from temporalio.common import SearchAttributeKey

from ratchet.contracts import AttributeType, SearchAttribute

_KEY_OF: dict[AttributeType, Callable[[str], SearchAttributeKey[Any]]] = {
    AttributeType.KEYWORD: SearchAttributeKey.for_keyword,
    AttributeType.BOOL: SearchAttributeKey.for_bool,
    AttributeType.INT: SearchAttributeKey.for_int,
    AttributeType.DOUBLE: SearchAttributeKey.for_float,
}


def key(attribute: SearchAttribute) -> SearchAttributeKey[Any]:
    """The SDK's typed key for `attribute`, of its declared type."""
    return _KEY_OF[attribute.type](attribute.name)
