"""Tenants and priorities as data: the rule from a run's priority to Temporal's priority keys, the
tenant's checks, and the tenants' settings (weights, limits), each bad value named."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from ratchet.contracts import PRIORITY_LEVELS, AgentRun, parse_tenant_map, task_priority
from ratchet.ops.settings import SettingsError, load_settings


def test_a_runs_priority_is_a_band_of_two_keys_model_calls_first():
    keys = [
        (task_priority(None, p, None, True).priority_key, task_priority(None, p, None, False).priority_key)
        for p in range(1, 6)
    ]
    assert keys == [(1, 2), (3, 4), (5, 6), (7, 8), (9, 10)] and PRIORITY_LEVELS == 10
    assert task_priority(None, None, None, False).priority_key == 6, "no priority: the default, 3"


def test_the_weight_goes_with_a_tenant_only():
    assert task_priority("acme", 2, 3.0, True).fairness_weight == 3.0
    assert task_priority(None, 2, 3.0, True) == task_priority(None, 2, None, True)


@pytest.mark.parametrize(
    ("tenant", "says"),
    [("é" * 33, "66 bytes; at most 64"), ("", "blank"), ('a"b', "quotes"), ("a\nb", "printable")],
)
def test_a_bad_tenant_is_refused_naming_the_field(tenant, says):
    with pytest.raises(ValidationError) as refused:
        AgentRun(agent="probe", objective="x", tenant=tenant)
    assert refused.value.errors()[0]["loc"] == ("tenant",) and says in str(refused.value)


def test_a_tenant_of_64_bytes_and_priorities_1_to_5_are_taken():
    assert AgentRun(agent="probe", objective="x", tenant="é" * 32, priority=5).tenant == "é" * 32
    for priority in (0, 6):
        with pytest.raises(ValidationError) as refused:
            AgentRun(agent="probe", objective="x", priority=priority)
        assert refused.value.errors()[0]["loc"] == ("priority",)


def test_tenant_maps_parse_and_every_bad_value_names_its_tenant():
    assert parse_tenant_map(" acme:3, beta:0.5 ,", "weight", float) == {"acme": 3.0, "beta": 0.5}
    for text, says in [
        ("acme:0", "tenant 'acme': weight 0 must be above 0"),
        ("acme:-1", "tenant 'acme': weight -1 must be above 0"),
        ("acme:lots", "tenant 'acme': weight 'lots' is not a number"),
        ("acme", "'acme' is not TENANT:WEIGHT"),
        ("acme:nan", "tenant 'acme': weight nan must be above 0"),
    ]:
        with pytest.raises(ValueError, match=says):
            parse_tenant_map(text, "weight", float)
    with pytest.raises(ValueError, match="tenant 'acme': limit '1.5' is not a number"):
        parse_tenant_map("acme:1.5", "limit", int)


def test_the_settings_name_the_variable_and_the_tenant(monkeypatch):
    monkeypatch.setenv("RATCHET_TENANT_WEIGHTS", "acme:3,beta:0")
    with pytest.raises(SettingsError, match="RATCHET_TENANT_WEIGHTS: .*tenant 'beta': weight 0 must be above 0"):
        load_settings()
    monkeypatch.setenv("RATCHET_TENANT_WEIGHTS", "acme:3")
    monkeypatch.setenv("RATCHET_TENANT_MAX_OPEN", "acme:100")
    monkeypatch.setenv("RATCHET_TENANT_OVER_LIMIT", "Queue")
    settings = load_settings()
    assert (settings.tenant_weight("acme"), settings.tenant_weight("beta"), settings.tenant_weight(None)) == (
        3.0,
        None,
        None,
    )
    assert (settings.tenant_limit("acme"), settings.tenant_limit("beta"), settings.tenant_over_limit) == (
        100,
        None,
        "queue",
    )


def test_a_daily_cap_names_the_variable_and_the_tenant(monkeypatch):
    monkeypatch.setenv("RATCHET_TENANT_DAILY_USD", "acme:50,beta:-1")
    with pytest.raises(SettingsError, match="RATCHET_TENANT_DAILY_USD: .*tenant 'beta': daily cap -1 must be above 0"):
        load_settings()
    monkeypatch.setenv("RATCHET_TENANT_DAILY_USD", "acme:lots")
    with pytest.raises(SettingsError, match="RATCHET_TENANT_DAILY_USD: .*tenant 'acme': daily cap 'lots' is not a number"):
        load_settings()
    monkeypatch.setenv("RATCHET_TENANT_DAILY_USD", "acme:12.5")
    settings = load_settings()
    assert (settings.tenant_daily_cap("acme"), settings.tenant_daily_cap("beta"), settings.tenant_daily_cap(None)) == (
        12.5,
        None,
        None,
    )
