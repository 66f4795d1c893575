"""Ed25519 proofs of decisions (ratchet/core/decision_proof.py) and their settings: keys read in
each accepted form, a bad key a clear error at start naming the setting, a claim altered after
signing or out of its time window refused."""

from __future__ import annotations

import base64
from datetime import UTC, datetime, timedelta

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from ratchet.contracts.decisions import DecisionClaim, call_digest
from ratchet.core.decision_proof import KeyProblem, Signer, private_key, problem, public_keys
from ratchet.ops.settings import SettingsError, load_settings

NOW = datetime(2026, 12, 4, 12, 0, tzinfo=UTC)
KEY = Ed25519PrivateKey.generate()


def _claim(**changes) -> DecisionClaim:
    claim = DecisionClaim(
        run_id="ops-1", call_id="call_1_0", digest=call_digest("create_ticket", "sha256:s", {"title": "prod"}),
        decision="approve", subject="alice", issuer="idp", roles=["ops"],
        issued_at=NOW.isoformat(), expires_at=(NOW + timedelta(minutes=5)).isoformat(),
    )
    return claim.model_copy(update=changes)


def test_a_signed_claim_holds_and_an_altered_one_does_not():
    signer = Signer("k1", KEY)
    keys = {"k1": signer.public}
    proof = signer.sign(_claim())
    assert problem(proof, keys, NOW, 0) is None
    altered = proof.model_copy(update={"claim": _claim(roles=["admin"])})
    assert "forged or altered" in problem(altered, keys, NOW, 0)
    assert "do not know" in problem(proof, {"k2": signer.public}, NOW, 0)


def test_the_time_window_allows_the_configured_skew_and_no_more():
    proof = Signer("k1", KEY).sign(_claim())
    keys = {"k1": Signer("k1", KEY).public}
    assert problem(proof, keys, NOW + timedelta(minutes=5, seconds=30), 60) is None
    assert "expired at" in problem(proof, keys, NOW + timedelta(minutes=7), 60)
    assert "after now" in problem(proof, keys, NOW - timedelta(minutes=2), 60)


def test_the_digest_covers_tool_schema_and_arguments():
    base = call_digest("t", "sha256:a", {"x": 1, "y": [1, 2]})
    assert base == call_digest("t", "sha256:a", {"y": [1, 2], "x": 1})  # canonical: key order does not matter
    assert len({base, call_digest("u", "sha256:a", {"x": 1, "y": [1, 2]}), call_digest("t", "sha256:b", {"x": 1, "y": [1, 2]}),
                call_digest("t", "sha256:a", {"x": 2, "y": [1, 2]})}) == 4


def test_signing_keys_load_as_pem_raw_or_base64():
    raw = KEY.private_bytes_raw()
    pem = KEY.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    for data in (raw, base64.b64encode(raw), pem):
        assert private_key(data).private_bytes_raw() == raw
    with pytest.raises(KeyProblem, match="32 bytes"):
        private_key(base64.b64encode(b"short"))


def test_bad_public_keys_are_named():
    good = Signer("k", KEY).public
    assert public_keys(f"a:{good}, b:{good}") == {"a": good, "b": good}
    for text, expected in [("nocolon", "ID:BASE64"), (f"a:{good},a:{good}", "twice"), ("a:!!", "not base64"),
                           ("a:" + base64.b64encode(b"x" * 31).decode(), "32 bytes")]:
        with pytest.raises(KeyProblem, match=expected):
            public_keys(text)


def test_a_key_that_does_not_load_is_an_error_at_start_naming_the_setting(monkeypatch, tmp_path):
    monkeypatch.setenv("RATCHET_APPROVER_KEYS", "ops:not-base64")
    with pytest.raises(SettingsError, match="RATCHET_APPROVER_KEYS: .*not base64"):
        load_settings()
    monkeypatch.delenv("RATCHET_APPROVER_KEYS")
    bad = tmp_path / "key.pem"
    bad.write_text("-----BEGIN PRIVATE KEY-----\nnope\n-----END PRIVATE KEY-----\n")
    monkeypatch.setenv("RATCHET_SIGNING_KEY", str(bad))
    with pytest.raises(SettingsError, match="RATCHET_SIGNING_KEY: .*PEM"):
        load_settings()
    monkeypatch.setenv("RATCHET_SIGNING_KEY", str(tmp_path / "missing"))
    with pytest.raises(SettingsError, match="RATCHET_SIGNING_KEY: .*cannot read"):
        load_settings()
