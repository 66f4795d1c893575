"""The price table: the built-in one with the date it was taken, a file over it, and bad files
refused with the field named."""

from __future__ import annotations

import json
import logging

import pytest

from ratchet.core import prices
from ratchet.core.prices import PriceTableError
from ratchet.core.settings_errors import SettingsError


def write(tmp_path, body) -> object:
    path = tmp_path / "prices.json"
    path.write_text(json.dumps(body))
    return path


def test_a_file_replaces_the_built_in_price_of_its_models(tmp_path):
    path = write(tmp_path, {"taken": "2026-12-01", "prices": {"openai/gpt-4o-mini": {"input": 1, "output": 2}}})
    table = prices.table(path)
    assert table.taken == "2026-12-01"
    assert table.price("openai", "gpt-4o-mini") == prices.Price(1.0, 2.0)
    assert table.price("anthropic", "claude-sonnet-4-5") == prices.BUILTIN["anthropic/claude-sonnet-4-5"]
    assert table.price("scripted", "anything").per_1k()["usd_per_1k_prompt_tokens"] == 0.0


@pytest.mark.parametrize(
    ("entry", "problem"),
    [
        ({"input": -1, "output": 2}, "prices.openai/m.input: -1 is negative"),
        ({"input": 1, "output": "cheap"}, "prices.openai/m.output: 'cheap' is not a number"),
        ({"input": 1}, "prices.openai/m.output: required"),
        ({"input": 1, "output": 1, "cached": 1}, "prices.openai/m.cached: unknown field"),
    ],
)
def test_a_bad_price_is_refused_naming_the_field(tmp_path, entry, problem):
    path = write(tmp_path, {"taken": "2026-12-01", "prices": {"openai/m": entry}})
    with pytest.raises(PriceTableError, match=problem.replace(".", r"\.").replace("$", r"\$")):
        prices.table(path)
    with pytest.raises(SettingsError, match="RATCHET_PRICES_FILE: price file .*" + problem.split(":")[0]):
        prices.from_settings(path)


def test_a_file_without_its_date_is_refused(tmp_path):
    with pytest.raises(PriceTableError, match="taken: expected the date"):
        prices.table(write(tmp_path, {"prices": {}}))


def test_an_unknown_model_has_no_price_and_is_warned_about_once(caplog):
    table = prices.table()
    with caplog.at_level(logging.WARNING, logger="ratchet.prices"):
        assert table.price("openai", "no-such-model-x1") is None
        assert table.price("openai", "no-such-model-x1") is None
    warned = [r for r in caplog.records if "no-such-model-x1" in r.getMessage()]
    assert len(warned) == 1 and "cost is marked unknown" in warned[0].getMessage()


def test_openai_cached_input_is_priced_at_the_tables_cached_price():
    from ratchet.contracts import ModelSettings
    from ratchet.core import budget
    from ratchet.models.openai import usage_of

    usage = usage_of({"prompt_tokens": 1000, "completion_tokens": 100, "prompt_tokens_details": {"cached_tokens": 600}})
    assert (usage.prompt_tokens, usage.cache_read_tokens, usage.cache_write_tokens) == (1000, 600, 0)
    price = prices.table().price("openai", "gpt-4o-mini")
    settings = ModelSettings(provider="openai", model="gpt-4o-mini", **price.per_1k())
    assert budget.cost(usage, settings) == pytest.approx((400 * 0.15 + 600 * 0.075 + 100 * 0.60) / 1e6)
