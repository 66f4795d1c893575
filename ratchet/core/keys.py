"""Idempotency keys: `{workflow_id}/{step}/{call_id}`.

No run id and no attempt number, so a key survives retries, worker crashes and continue-as-new.
"""

from __future__ import annotations

import re

_UNSAFE = re.compile(r"[^A-Za-z0-9_.:-]")


def call_key(workflow_id: str, step: int, call_id: str) -> str:
    return f"{workflow_id}/{step}/{call_id}"


def model_key(workflow_id: str, step: int) -> str:
    return call_key(workflow_id, step, "model")


def undo_key(key: str) -> str:
    return f"{key}/undo"


def unique_call_ids(raw_ids: list[str]) -> list[str]:
    """Model-written call ids, made safe and unique within one reply (keys must not collide)."""
    seen: set[str] = set()
    out = []
    for j, raw in enumerate(raw_ids):
        cid = _UNSAFE.sub("_", raw or "")[:64] or f"call{j}"
        if cid in seen:
            cid = f"{cid}.{j}"
        seen.add(cid)
        out.append(cid)
    return out
