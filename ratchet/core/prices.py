"""Model prices: one table per provider and model, with the date it was taken, overridable by a file.

The billing ledger (activities/billing.py) prices every model attempt from the run's
`ModelSettings`, whose prices `run.prepare` takes from here when the run is planned: a profile's
own `usd_per_1k_*` prices, where it sets them, win (a negotiated price); else this table, or the
operator's file (RATCHET_PRICES_FILE), whose entries replace the built-in ones model by model. A
model in neither is *unpriced*: the run starts, its cost counts 0 and is marked unknown, and the
worker warns once per model.

Prices are in US dollars per million tokens, as the providers publish them:
`input` (uncached prompt tokens), `output`, `cache_read` (OpenAI's "cached input", Anthropic's cache
reads) and `cache_write` (Anthropic's cache writes; OpenAI writes the cache for free, at the input
price). The file is JSON: `{"taken": "2026-12-01", "prices": {"openai/gpt-4o-mini": {"input": 0.15,
"output": 0.6, "cache_read": 0.075}}}`; a model `*` prices every model of its provider.
"""

from __future__ import annotations

import json
import logging
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

log = logging.getLogger("ratchet.prices")

TAKEN = "2026-11-01"
"""When the built-in table was read off the providers' price pages."""


@dataclass(frozen=True)
class Price:
    """USD per million tokens."""

    input: float
    output: float
    cache_read: float | None = None
    """None: the input price."""
    cache_write: float | None = None
    """None: the input price."""

    def per_1k(self) -> dict[str, float | None]:
        """As `ModelSettings`' `usd_per_1k_*` fields."""
        return {
            "usd_per_1k_prompt_tokens": self.input / 1000,
            "usd_per_1k_completion_tokens": self.output / 1000,
            "usd_per_1k_cache_read_tokens": None if self.cache_read is None else self.cache_read / 1000,
            "usd_per_1k_cache_write_tokens": None if self.cache_write is None else self.cache_write / 1000,
        }


BUILTIN: dict[str, Price] = {
    "openai/gpt-4o-mini": Price(0.15, 0.60, cache_read=0.075),
    "openai/gpt-4o": Price(2.50, 10.00, cache_read=1.25),
    "openai/gpt-4.1": Price(2.00, 8.00, cache_read=0.50),
    "openai/gpt-4.1-mini": Price(0.40, 1.60, cache_read=0.10),
    "openai/gpt-4.1-nano": Price(0.10, 0.40, cache_read=0.025),
    "openai/o4-mini": Price(1.10, 4.40, cache_read=0.275),
    "anthropic/claude-sonnet-4-5": Price(3.00, 15.00, cache_read=0.30, cache_write=3.75),
    "anthropic/claude-sonnet-4-0": Price(3.00, 15.00, cache_read=0.30, cache_write=3.75),
    "anthropic/claude-opus-4-1": Price(15.00, 75.00, cache_read=1.50, cache_write=18.75),
    "anthropic/claude-haiku-4-5": Price(1.00, 5.00, cache_read=0.10, cache_write=1.25),
    "anthropic/claude-3-5-haiku-latest": Price(0.80, 4.00, cache_read=0.08, cache_write=1.00),
    "scripted/*": Price(0.0, 0.0),  # the scripted provider runs no model
    "recorded/*": Price(0.0, 0.0),  # a shadow's recorded replies (a candidate model's calls: see README "Cost")
}
FIELDS = ("input", "output", "cache_read", "cache_write")


class PriceTableError(ValueError):
    """A price file the worker cannot use; the message names the file and the field."""


@dataclass(frozen=True)
class PriceTable:
    prices: dict[str, Price]
    taken: str

    def price(self, provider: str, model: str) -> Price | None:
        """The model's price, else its provider's `*` price, else None (unpriced: warned once)."""
        found = self.prices.get(f"{provider}/{model}") or self.prices.get(f"{provider}/*")
        if found is None and (provider, model) not in _warned:
            _warned.add((provider, model))
            log.warning(
                "no price for model %s/%s (price table of %s): its calls are billed at $0 and the run's "
                "cost is marked unknown; add it to RATCHET_PRICES_FILE",
                provider,
                model,
                self.taken,
            )
        return found


_warned: set[tuple[str, str]] = set()


def table(path: Path | None = None) -> PriceTable:
    """The built-in table, with the file's entries (if any) over it."""
    if path is None:
        return PriceTable(dict(BUILTIN), TAKEN)
    given = load(path)
    return PriceTable({**BUILTIN, **given.prices}, given.taken)


def from_settings(path: Path | None) -> PriceTable:
    """The worker's table (RATCHET_PRICES_FILE over the built-in one); a bad file is a
    `SettingsError` naming the setting and the field."""
    from ratchet.core.settings_errors import SettingsError

    try:
        return table(path)
    except PriceTableError as exc:
        raise SettingsError(f"RATCHET_PRICES_FILE: {exc}") from None


def load(path: Path) -> PriceTable:
    """A price file, checked: a clear `PriceTableError` naming the field."""
    try:
        raw = json.loads(Path(path).read_text())
    except (OSError, ValueError) as exc:
        raise PriceTableError(f"price file {path}: cannot read it as JSON: {exc}") from None
    if not isinstance(raw, dict) or not isinstance(raw.get("prices"), dict):
        raise PriceTableError(f"price file {path}: prices: expected an object of 'provider/model' entries")
    taken = raw.get("taken")
    if not isinstance(taken, str) or not taken:
        raise PriceTableError(f"price file {path}: taken: expected the date the prices were taken (YYYY-MM-DD)")
    prices = {name: _price(path, name, entry) for name, entry in raw["prices"].items()}
    return PriceTable(prices, taken)


def _price(path: Path, name: str, entry: Any) -> Price:
    where = f"price file {path}: prices.{name}"
    if name.count("/") != 1 or not all(name.split("/")):
        raise PriceTableError(f"{where}: the name must be 'provider/model' (model '*': every model)")
    if not isinstance(entry, dict):
        raise PriceTableError(f"{where}: expected an object with input, output, cache_read, cache_write")
    unknown = sorted(set(entry) - set(FIELDS))
    if unknown:
        raise PriceTableError(f"{where}.{unknown[0]}: unknown field (known: {', '.join(FIELDS)})")
    for field in ("input", "output"):
        if field not in entry:
            raise PriceTableError(f"{where}.{field}: required (USD per million tokens)")
    values = {}
    for field, value in entry.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise PriceTableError(f"{where}.{field}: {value!r} is not a number (USD per million tokens)")
        if value < 0:
            raise PriceTableError(f"{where}.{field}: {value!r} is negative")
        values[field] = float(value)
    return Price(**values)
