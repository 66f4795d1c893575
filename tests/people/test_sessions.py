"""The console's signed cookies (ratchet/people/sessions.py): what one key sealed opens with it, until
its expiry; a changed byte, another key or a passed expiry reads as nobody."""

from __future__ import annotations

from ratchet.contracts.identity import Principal
from ratchet.people.sessions import Signer

ALICE = Principal(subject="alice", issuer="https://idp.example", roles=["approver"], via="oidc")


def test_a_session_opens_with_its_key_until_it_expires():
    now = [1_000_000.0]
    signer = Signer(key=b"k" * 32, ttl_s=60, clock=lambda: now[0])
    sealed = signer.session(ALICE)
    assert signer.principal(sealed) == ALICE
    now[0] += 59
    assert signer.principal(sealed) == ALICE
    now[0] += 2
    assert signer.principal(sealed) is None


def test_a_changed_session_or_another_key_reads_as_nobody():
    signer = Signer(key=b"k" * 32)
    sealed = signer.session(ALICE)
    data, _, mac = sealed.rpartition(".")
    forged = signer.session(ALICE.model_copy(update={"subject": "mallory", "roles": ["admin"]}))
    assert signer.principal(forged.rpartition(".")[0] + "." + mac) is None  # mallory's body, alice's MAC
    assert signer.principal(data + "." + mac[:-1] + ("0" if mac[-1] != "0" else "1")) is None
    assert Signer(key=b"x" * 32).principal(sealed) is None
    for junk in ("", "no-dot", ".", "e30." + mac, None):
        assert signer.principal(junk) is None
    assert signer.open(signer.seal({"state": "s"}, ttl_s=-1)) is None
