"""Webhooks in, the pure part (ratchet/serve/hooks.py): signatures, timestamps, delivery ids,
templates, the hooks file."""

from __future__ import annotations

import hashlib
import hmac
import json

import pytest

from ratchet.serve.hooks import Hook, HookError, load_hooks, render, verify

ENV = {"HOOK_SECRET": "s3cret"}


def signed(body: bytes, secret: str = "s3cret", stamp: str | None = None) -> str:
    data = body if stamp is None else stamp.encode() + b"." + body
    return "sha256=" + hmac.new(secret.encode(), data, hashlib.sha256).hexdigest()


def hook(**extra) -> Hook:
    return Hook.model_validate({"secret": "${HOOK_SECRET}", "run": {"agent": "ops", "objective": "{title}"}, **extra})


def test_a_delivery_signed_with_the_secret_is_taken_and_any_other_refused():
    body = b'{"title": "x"}'
    headers = {"x-hub-signature-256": signed(body), "x-github-delivery": "d-1"}
    assert verify(hook(), body, headers, now=0, environ=ENV) == "d-1"
    for bad in (signed(body, "other"), signed(b'{"title": "y"}'), "", "sha256=", signed(body).upper()):
        with pytest.raises(HookError) as refused:
            verify(hook(), body, {**headers, "x-hub-signature-256": bad}, now=0, environ=ENV)
        assert refused.value.status == 401
    with pytest.raises(HookError) as refused:
        verify(hook(), body, {"x-hub-signature-256": signed(body)}, now=0, environ=ENV)
    assert refused.value.status == 400 and "X-GitHub-Delivery" in refused.value.reason
    with pytest.raises(HookError) as refused:
        verify(hook(), body, headers, now=0, environ={})
    assert refused.value.status == 503 and "HOOK_SECRET" in refused.value.reason


def test_a_hook_with_a_replay_window_signs_the_timestamp_and_refuses_an_old_one():
    body, now = b"{}", 1_000_000.0
    windowed = hook(max_age_s=300)
    fresh = {
        "x-hub-signature-256": signed(body, stamp="999900"),
        "x-ratchet-timestamp": "999900",
        "x-github-delivery": "d",
    }
    assert verify(windowed, body, fresh, now=now, environ=ENV) == "d"
    old = {**fresh, "x-hub-signature-256": signed(body, stamp="999000"), "x-ratchet-timestamp": "999000"}
    with pytest.raises(HookError, match="1000 s from now"):
        verify(windowed, body, old, now=now, environ=ENV)
    moved = {**fresh, "x-ratchet-timestamp": "999901"}  # the signature is over the other time
    with pytest.raises(HookError, match="does not match"):
        verify(windowed, body, moved, now=now, environ=ENV)
    with pytest.raises(HookError, match="X-Ratchet-Timestamp"):
        verify(windowed, body, {"x-hub-signature-256": signed(body)}, now=now, environ=ENV)


def test_templates_take_the_bodys_fields_whole_or_as_text():
    body = {"issue": {"number": 42, "title": "crash on start", "labels": ["bug", "p1"]}, "n": 3}
    template = {
        "objective": "triage #{issue.number}: {issue.title} {{not a field}}",
        "budget": {"max_steps": "{n}"},
        "tags": ["{issue.labels.1}"],
        "keep": 7,
    }
    assert render(template, body) == {
        "objective": "triage #42: crash on start {not a field}",
        "budget": {"max_steps": 3},
        "tags": ["p1"],
        "keep": 7,
    }
    with pytest.raises(HookError) as refused:
        render({"objective": "{issue.body}"}, body, "run")
    assert refused.value.status == 400 and refused.value.reason == "run.objective: the body has no field 'issue.body'"


def test_a_hooks_file_with_a_mistake_is_refused_naming_it(tmp_path):
    path = tmp_path / "hooks.json"
    path.write_text(json.dumps({"hooks": {"a": {"secret": "plain-text", "run": {}}}}))
    with pytest.raises(ValueError, match="must name an environment variable"):
        load_hooks(path)
    path.write_text(
        json.dumps({"hooks": {"a": {"secret": "${X}", "run": {}, "message": {"session_id": "s", "text": "t"}}}})
    )
    with pytest.raises(ValueError, match="exactly one of run, message or decision"):
        load_hooks(path)
    path.write_text(json.dumps({"hooks": {"bad name": {"secret": "${X}", "run": {}}}}))
    with pytest.raises(ValueError, match="hook names"):
        load_hooks(path)
    toml = tmp_path / "hooks.toml"
    toml.write_text('[hooks.issues]\nsecret = "${X}"\nrun = {agent = "ops", objective = "{title}"}\n')
    assert load_hooks(toml)["issues"].action == "run"
