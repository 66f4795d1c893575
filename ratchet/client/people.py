"""People and their API tokens (`ratchet users`), in the ledger's database of the settings
(ratchet/stores/users.py): what the CLI and programs use instead of SQL."""

from __future__ import annotations

from ratchet.ops.settings import Settings
from ratchet.stores.users import User, UserError, UserStore, open_users

__all__ = ["User", "UserError", "UserStore", "people"]


def people(settings: Settings) -> UserStore:
    """The people's table in RATCHET_LEDGER_URL's database (created if absent); SettingsError if
    that database cannot be used."""
    return open_users(settings.ledger_store_url)
