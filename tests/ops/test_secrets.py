"""Secrets never reach the model, history, the logs or `.ratchet/` in any form redaction recognises.

Unit tests: one list of variables drives stripping and redaction; every encoding and every long
enough substring is masked. End to end: a worker process holding three secrets runs a program that
prints them in every encoding; history, the worker's log and the state directory hold none of them.
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import os
import re
import secrets as random_secrets
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from urllib.parse import quote, quote_plus

import pytest
from pydantic import BaseModel
from temporalio.api.common.v1 import Payload
from temporalio.client import Client

from devtools.workers import WorkerProcess
from ratchet.contracts import AgentResult, Phase
from ratchet.ops.logs import JsonFormatter, RedactingFilter
from ratchet.ops.redaction import MASK, Redactor, redacted, redacted_error
from ratchet.ops.secrets import child_environment, secret_values
from ratchet.ops.settings import Settings
from ratchet.replay.replayer import payloads_in
from tests.ops_workers import ROOT, worker_env
from tests.runs import scripted, start

KEY = "sk-proj-Zq7Xw2Lm9Pt4Rv8Ks1Hd6Jn3Bc5Fg0Ya"


def b64(data: bytes, urlsafe: bool = False, pad: bool = True) -> str:
    text = (base64.urlsafe_b64encode if urlsafe else base64.b64encode)(data).decode()
    return text if pad else text.rstrip("=")


def embedded(secret: str, before: int, after: int = 4) -> tuple[str, int, int]:
    """base64 of the secret inside a blob (`before` bytes ahead of it): the blob, and the range of its
    characters that depend on the secret's bytes alone."""
    blob = base64.b64encode(os.urandom(before) + secret.encode() + os.urandom(after)).decode()
    return blob, -(-8 * before // 6), 8 * (before + len(secret)) // 6


ENCODINGS: dict[str, Callable[[str], str]] = {
    "verbatim": lambda s: s,
    "reversed": lambda s: s[::-1],
    "hex": lambda s: s.encode().hex(),
    "HEX": lambda s: s.encode().hex().upper(),
    "base64": lambda s: b64(s.encode()),
    "base64, no padding": lambda s: b64(s.encode(), pad=False),
    "urlsafe base64": lambda s: b64(s.encode(), urlsafe=True),
    "urlsafe base64, no padding": lambda s: b64(s.encode(), urlsafe=True, pad=False),
    "percent-encoded": lambda s: quote(s, safe=""),
    "percent-encoded, lowercase": lambda s: re.sub("%..", lambda m: m.group().lower(), quote(s, safe="")),
    "form-encoded": lambda s: quote_plus(s, safe=""),
    "16 characters of it": lambda s: s[5:21],
    "16 characters reversed": lambda s: s[::-1][7:23],
    "16 characters of its hex": lambda s: s.encode().hex()[3:19],
    "16 characters of its base64": lambda s: b64(s.encode())[2:18],
}
# a secret whose percent-encoding differs from it, whose base64 has + and / (urlsafe: - and _)
AWKWARD = "p@ss/w0rd+with spaces&more~" + "\xe9t\xe9" + ">>??>>"


def forms(secret: str) -> list[str]:
    """What the scans look for (independently of the code under test): every encoding above in full,
    base64 inside a blob at each alignment."""
    found = [encode(secret) for encode in ENCODINGS.values()]
    for k in range(3):
        blob = base64.b64encode(bytes(k) + secret.encode()).decode()
        found.append(blob[-(-8 * k // 6):8 * (k + len(secret)) // 6])
    return found


def windows(secret: str, size: int = 16) -> set[bytes]:
    return {f[i:i + size].encode() for f in forms(secret) for i in range(len(f) - size + 1)}


def leaks(haystack: bytes, secrets: list[str]) -> list[str]:
    """The secrets of which some 16-character piece of some form is in `haystack`."""
    wanted = {w: s for s in secrets for w in windows(s)}
    found = {wanted[haystack[i:i + 16]] for i in range(len(haystack) - 15) if haystack[i:i + 16] in wanted}
    return sorted(found)


# ---- encodings ------------------------------------------------------------------------------------


@pytest.mark.parametrize("secret", [KEY, AWKWARD], ids=["key", "awkward"])
@pytest.mark.parametrize("encoding", list(ENCODINGS))
def test_every_encoding_is_redacted(secret: str, encoding: str):
    form = ENCODINGS[encoding](secret)
    text = f"before {form} after"
    if form != secret:  # percent-encoding leaves KEY as it is; AWKWARD changes
        assert text.replace(secret, MASK) == text, "redacting the value as written would miss it"
    out = Redactor([secret]).redact(text)
    assert out.startswith("before ") and out.endswith(" after") and MASK in out, out
    assert not leaks(out.encode(), [secret]), out


@pytest.mark.parametrize("before", range(6))
def test_base64_of_a_secret_inside_a_longer_blob_is_redacted_at_every_alignment(before: int):
    blob, start, end = embedded(KEY, before)
    out = Redactor([KEY]).redact(f"data={blob};")
    kept_before, _, kept_after = out[len("data="):-1].partition(MASK)
    assert MASK in out and len(kept_before) <= start and len(kept_after) <= len(blob) - end, (blob, out)


def test_a_substring_of_16_characters_is_redacted_and_of_15_is_not():
    redactor = Redactor([KEY])
    assert redactor.redact(f"x{KEY[10:26]}y") == f"x{MASK}y"
    assert redactor.redact(f"x{KEY[10:25]}y") == f"x{KEY[10:25]}y"
    assert redactor.redact(f"{KEY[:20]} and {KEY[-20:]}") == f"{MASK} and {MASK}"


def test_a_secret_inside_words_and_repeated_is_redacted_everywhere():
    redactor = Redactor([KEY])
    hexed = KEY.encode().hex()
    out = redactor.redact(f"{KEY}{KEY}|{hexed}{KEY[::-1]}|a{KEY}b\n" * 3)
    assert out == f"{MASK}|{MASK}|a{MASK}b\n" * 3


def test_short_values_are_matched_whole_and_shorter_than_8_not_at_all():
    redactor = Redactor(["hunter2pw", "tiny"])
    assert redactor.redact("pw=hunter2pw;") == f"pw={MASK};"
    assert redactor.redact("pw=" + "hunter2pw"[::-1]) == f"pw={MASK}"
    assert redactor.redact("pw=" + b"hunter2pw".hex()) == f"pw={MASK}", "its hex is 18 characters"
    assert redactor.redact("hunter2 and tiny") == "hunter2 and tiny"


def test_ordinary_text_is_left_alone_and_is_the_same_object():
    redactor = Redactor([KEY, AWKWARD, os.urandom(32)])
    text = "".join(f"line {i:06d}: sha256 {os.urandom(32).hex()} base64 {b64(os.urandom(30))}\n" for i in range(200))
    assert redactor.redact(text) is text
    assert Redactor([]).redact(KEY) == KEY


def test_bytes_secrets_are_found_in_their_encodings():
    raw = os.urandom(32)
    redactor = Redactor([raw])
    for form in (raw.hex(), raw.hex().upper(), b64(raw), b64(raw, urlsafe=True, pad=False)):
        assert redactor.redact(f"[{form}]") == f"[{MASK}]"


def test_16_kib_of_tool_output_with_five_secrets_takes_a_few_milliseconds():
    values = [KEY, AWKWARD, os.urandom(32), "x" * 4 + random_secrets.token_urlsafe(30), random_secrets.token_hex(20)]
    redactor = Redactor(values)
    noise = random_secrets.token_urlsafe(12 * 1024)[:16 * 1024 - 200]
    dirty = noise[:5000] + b64(KEY.encode()) + noise[5000:11000] + KEY[::-1] + noise[11000:]
    timings = []
    for text in (noise, dirty) * 5:
        began = time.perf_counter()
        out = redactor.redact(text)
        timings.append(time.perf_counter() - began)
    assert out.count(MASK) == 2
    assert min(timings) < 0.01, timings  # ~1 ms on the CI machine; generous for a shared one


# ---- where it applies ----------------------------------------------------------------------------


class Reply(BaseModel):
    content: str | None
    arguments: list[str]
    extra: dict[str, object]
    untouched: str = "plain"


def test_every_string_of_a_result_is_redacted_and_the_rest_kept():
    redactor = Redactor([KEY])
    reply = Reply(content=f"here: {b64(KEY.encode())}", arguments=["ok", KEY[::-1]], extra={"n": 3, "k": [KEY]})
    clean = redacted(reply, redactor)
    assert clean.content == f"here: {MASK}" and clean.arguments == ["ok", MASK]
    assert clean.extra == {"n": 3, "k": [MASK]} and clean.untouched == "plain"
    assert reply.content != clean.content, "the original is not changed"
    fine = Reply(content="fine", arguments=["a"], extra={})
    assert redacted(fine, redactor) is fine
    assert redacted(KEY) == KEY, "outside an activity there is no redactor"


def test_failure_messages_and_causes_are_redacted_in_every_form():
    redactor = Redactor([KEY])
    try:
        try:
            raise ValueError(f"header was {KEY.encode().hex()}")
        except ValueError as inner:
            raise RuntimeError(f"call failed: {quote(KEY[::-1])}") from inner
    except RuntimeError as exc:
        clean = redacted_error(exc, redactor)
    assert clean.message == f"call failed: {MASK} (caused by ValueError: header was {MASK})"
    harmless = RuntimeError("nothing secret")
    assert redacted_error(harmless, redactor) is harmless


def test_log_records_are_redacted_in_message_arguments_and_tracebacks():
    redactor = Redactor([KEY])
    logger = logging.getLogger(f"test.secrets.{uuid.uuid4().hex}")
    lines: list[str] = []

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            lines.append(self.format(record))

    for formatter in (logging.Formatter("%(message)s"), JsonFormatter()):
        handler = Collect()
        handler.addFilter(RedactingFilter(redactor))
        handler.setFormatter(formatter)
        logger.addHandler(handler)
        logger.propagate = False
        logger.warning("got %s and %r", b64(KEY.encode()), {"k": KEY[3:30]})
        try:
            raise PermissionError(f"denied for {KEY.encode().hex().upper()}")
        except PermissionError:
            logger.exception("failed")
        logger.removeHandler(handler)
    text = "\n".join(lines)
    assert text.count(MASK) == 6 and "PermissionError" in text, text
    assert not leaks(text.encode(), [KEY]), text


# ---- one list: stripping and redaction -------------------------------------------------------------


def pem(der: bytes) -> bytes:
    body = b64(der)
    lines = [body[i:i + 64] for i in range(0, len(body), 64)]
    return ("-----BEGIN PRIVATE KEY-----\n" + "\n".join(lines) + "\n-----END PRIVATE KEY-----\n").encode()


def test_every_secret_bearing_variable_is_stripped_from_children_and_redacted(tmp_path: Path, monkeypatch):
    der = os.urandom(120)
    (tmp_path / "client.key").write_bytes(pem(der))
    (tmp_path / "client.pem").write_bytes(pem(os.urandom(60)).replace(b"PRIVATE KEY", b"CERTIFICATE"))
    codec_key = b64(os.urandom(32))
    values = {
        "OPENAI_API_KEY": "sk-openai-" + random_secrets.token_hex(12),
        "OPENAI_ADMIN_KEY": "sk-admin-" + random_secrets.token_hex(12),
        "OPENAI_WEBHOOK_SECRET": "whsec_" + random_secrets.token_hex(12),
        "AZURE_OPENAI_API_KEY": random_secrets.token_hex(16),
        "AZURE_OPENAI_AD_TOKEN": "eyJ" + random_secrets.token_urlsafe(24),
        "AWS_BEARER_TOKEN_BEDROCK": "bedrock-" + random_secrets.token_hex(12),
        "TEMPORAL_API_KEY": "tmprl-" + random_secrets.token_hex(12),
        "AWS_SECRET_ACCESS_KEY": random_secrets.token_urlsafe(30),
        "AWS_SESSION_TOKEN": random_secrets.token_urlsafe(40),
        "TEMPORAL_GRPC_META_AUTHORIZATION": "Bearer " + random_secrets.token_hex(12),
        "DEPLOY_TOKEN": "deploy-" + random_secrets.token_hex(12),
    }
    password = "pg-" + random_secrets.token_hex(8)
    env = {
        **values,
        "RATCHET_SECRET_VARIABLES": "DEPLOY_TOKEN, NOT_SET",
        "OPENAI_CUSTOM_HEADERS": f"X-Team: ratchet\nAuthorization: Bearer hdr-{password}",
        "RATCHET_LEDGER_URL": f"postgresql://ratchet:{password}@db:5432/ratchet",
        "RATCHET_CODEC_KEYS": f"k1:{codec_key}",
        "TEMPORAL_TLS_CLIENT_KEY_PATH": str(tmp_path / "client.key"),
        "TEMPORAL_TLS_CLIENT_CERT_PATH": str(tmp_path / "client.pem"),
        "TEMPORAL_CONFIG_FILE": str(tmp_path / "temporal.toml"),
        "PATH": "/usr/bin", "HOME": "/home/agent", "LANG": "C.UTF-8",
    }
    (tmp_path / "temporal.toml").write_text("")
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    settings = Settings(_env_file=None)

    assert child_environment(env) == {"PATH": "/usr/bin", "HOME": "/home/agent", "LANG": "C.UTF-8"}
    found = secret_values(settings, env)
    for name, value in values.items():
        assert value in found, name
    assert password in found and f"Bearer hdr-{password}" in found and "postgresql" not in "".join(map(str, found))
    assert codec_key in found and base64.b64decode(codec_key) in found
    assert der in found, "the TLS key's bytes"
    assert not any(isinstance(v, str) and ("postgresql" in v or str(tmp_path) in v) for v in found), "not URLs or paths"

    redactor = Redactor(found)
    assert redactor.redact(values["AZURE_OPENAI_API_KEY"]) == MASK, "Azure's key is redacted, not only stripped"
    assert redactor.redact(f"der: {der.hex()}") == f"der: {MASK}"
    assert redactor.redact(pem(der).decode()).count(MASK) >= 2, "every full line of the key file"


# ---- end to end ------------------------------------------------------------------------------------


def printing_script(secrets: list[str], repeat_after: int = 0) -> str:
    """A `python -c` program printing each secret in every form ENCODINGS lists and inside base64
    blobs; the secrets are written as 6-character pieces, so the program (in the workflow input and
    the model's tool call) holds none of them. `repeat_after`: that many filler characters, then all
    again (an output too big to stay inline)."""
    pieces = [[s[i:i + 6] for i in range(0, len(s), 6)] for s in secrets]
    return "\n".join([
        "import base64, re, urllib.parse as u",
        f"S = [''.join(p) for p in {pieces!r}]",
        "def show():",
        "    for s in S:",
        "        b = s.encode()",
        "        for f in (s, s[::-1], b.hex(), b.hex().upper(), base64.b64encode(b).decode(),",
        "                  base64.urlsafe_b64encode(b).decode().rstrip('='), u.quote(s, safe=''),",
        "                  re.sub('%..', lambda m: m.group().lower(), u.quote(s, safe='')), u.quote_plus(s, safe=''),",
        "                  s[5:21], s[::-1][7:23],",
        "                  b.hex()[3:19], base64.b64encode(b).decode()[2:18]):",
        "            print(f)",
        "        for k in range(3):",
        "            print(base64.b64encode(b'xyz'[:k] + b + b'!').decode())",
        "show()",
        f"print('.' * {repeat_after}) if {repeat_after} else None",
        f"show() if {repeat_after} else None",
        "print('printed', len(S))",
    ])


def run_command(script: str) -> dict:
    return {"name": "run_command", "arguments": {"argv": [sys.executable, "-c", script]}}


async def history_text(address: str, workflow_id: str) -> bytes:
    """Every event as the server stores it, and every payload in it decoded (JSON strings unescaped)."""
    plain = await Client.connect(address)
    history = await plain.get_workflow_handle(workflow_id).fetch_history()
    parts: list[bytes] = []
    for event in history.events:
        parts.append(event.SerializeToString())
        for payload in payloads_in(event):
            parts.append(payload.data)
            parts += [s.encode() for s in json_strings(payload)]
    return b"\n".join(parts)


def json_strings(payload: Payload) -> list[str]:
    if not payload.metadata.get("encoding", b"").startswith(b"json"):
        return []
    try:
        value = json.loads(payload.data)
    except ValueError:
        return []
    found: list[str] = []

    def walk(v: object) -> None:
        if isinstance(v, str):
            found.append(v)
        elif isinstance(v, dict):
            for item in v.values():
                walk(item)
        elif isinstance(v, list):
            for item in v:
                walk(item)

    walk(value)
    return found


async def test_a_program_printing_secrets_in_every_encoding_leaves_none_in_history_logs_or_state(
    dev_server, client, settings: Settings, tmp_path: Path
):
    secrets = {
        "OPENAI_API_KEY": "sk-proj-" + random_secrets.token_urlsafe(36),
        "AZURE_OPENAI_API_KEY": random_secrets.token_hex(16),
        "RATCHET_E2E_DEPLOY_TOKEN": "dpl_" + random_secrets.token_urlsafe(24) + "/+=",
    }
    values = list(secrets.values())
    # the oracle finds them in what the program prints when nothing redacts it
    code, raw = await _python(printing_script(values, repeat_after=9000))
    assert code == 0 and "printed 3" in raw and leaks(raw.encode(), values) == sorted(values)

    log = tmp_path / "worker.log"
    env = worker_env(
        settings, **secrets, RATCHET_SECRET_VARIABLES="RATCHET_E2E_DEPLOY_TOKEN",
        RATCHET_LOG_LEVEL="DEBUG", RATCHET_LOG_FORMAT="json",
    )
    worker = await WorkerProcess([sys.executable, "-m", "ratchet.worker"], env=env, cwd=ROOT, log=log).start(timeout=30)
    try:
        script = [
            {"tool_calls": [run_command(printing_script(values))]},  # inline output
            {"tool_calls": [run_command(printing_script(values, repeat_after=9000))]},  # kept as an artifact
            {"content": "done"},
        ]
        # the verifier (`python -m unittest` at the final answer) imports this module: it prints them too
        (settings.workspace_root / "secrets").mkdir(parents=True, exist_ok=True)
        (settings.workspace_root / "secrets" / "test_leak.py").write_text(printing_script(values, repeat_after=9000))
        handle = await start(client, settings, scripted("coder", script, workspace="secrets"))
        result: AgentResult = await asyncio.wait_for(handle.result(), 60)
        verified = [c.evidence.output for c in (await handle.state()).effects.checkpoints.items]
    finally:
        assert await worker.stop() == 0, worker.tail()
    assert result.phase == Phase.DONE, result

    history = await history_text(dev_server.address, handle.workflow_id)
    assert history.count(b"printed 3") >= 2, "both programs ran and their output is in history"
    assert history.count(MASK.encode()) >= 3 * 16, "every printed form was masked"
    assert leaks(history, values) == []

    assert b"run_command" in log.read_bytes(), "the log is the worker's, at DEBUG"
    assert leaks(log.read_bytes(), values) == []

    state = [p for p in tmp_path.rglob("*") if p.is_file() and p != log]
    assert any("artifacts" in p.parts for p in state) and any(p.name.startswith("ledger") for p in state)
    for path in state:
        assert leaks(path.read_bytes(), values) == [], path
    big_outputs = [p for p in state if "artifacts" in p.parts and b"printed 3" in p.read_bytes()]
    assert big_outputs, "the long output was kept as an artifact (and redacted there)"
    assert any("printed 3" in output for output in verified), "the verifier printed them too (its output is stored)"


async def _python(script: str) -> tuple[int, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", script, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT
    )
    out, _ = await proc.communicate()
    return proc.returncode or 0, out.decode()
