"""`ledger.forget`: a deleted shadow's ledger entries and chain (`ratchet shadow clean`,
workflows/shadow_clean.py). Its private workspace goes with `workspace.remove` (activities/hosts.py),
on the host that holds it."""

from __future__ import annotations

import asyncio

from temporalio import activity

from ratchet.contracts.activities import LEDGER_FORGET
from ratchet.contracts.shadow import ForgetRun
from ratchet.stores.ledger import Ledger


class ShadowActivities:
    def __init__(self, ledger: Ledger) -> None:
        self.ledger = ledger

    @activity.defn(name=LEDGER_FORGET.name)
    async def forget(self, req: ForgetRun) -> int:
        """Every entry of the run `req.workflow_id` deleted (`Ledger.forget`): how many."""
        deleted = await asyncio.to_thread(self.ledger.forget, req.workflow_id)
        activity.logger.info("ledger: %d entries of %s deleted", deleted, req.workflow_id)
        return deleted
