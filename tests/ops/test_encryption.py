"""Payload encryption: the codec, a run whose secrets never reach the server in clear, the codec server."""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import os
import sys
import urllib.error
import urllib.request
import uuid
from email.message import Message

import pytest
from google.protobuf import json_format
from pydantic import SecretStr
from temporalio.api.common.v1 import Payload, Payloads
from temporalio.api.sdk.v1 import ExternalStorageReference
from temporalio.client import Client
from temporalio.converter import JSONProtoPayloadConverter

from devtools.devserver import temporal_binary
from ratchet.client import RunFailed
from ratchet.contracts import AGENT_WORKFLOW, Phase
from ratchet.ops.settings import Settings, SettingsError, load_settings
from ratchet.payloads.codec import KEY_ID, CodecKeyError, EncryptionCodec
from ratchet.payloads.codec_server import CodecServer
from ratchet.payloads.converter import data_converter, payload_codec
from ratchet.payloads.offload import DRIVER_NAME
from ratchet.stores.artifacts import DirectoryArtifactStore
from ratchet.worker.main import build_worker
from tests.runs import runs, scripted, start

pytestmark = pytest.mark.e2e  # processes as a user runs them: `make test-e2e`, not `make test`

def new_key() -> bytes:
    return os.urandom(32)


def spec(**keys: bytes) -> str:
    return ",".join(f"{key_id}:{base64.b64encode(key).decode()}" for key_id, key in keys.items())


def plain_payload(text: str) -> Payload:
    return Payload(metadata={"encoding": b"json/plain"}, data=json.dumps(text).encode())


# ---- the codec -----------------------------------------------------------------------------


async def test_round_trip_uses_a_fresh_nonce_per_payload():
    codec = EncryptionCodec({"k1": new_key()})
    original = plain_payload("hello secret")
    first, second = await codec.encode([original, original])
    assert first.metadata["encoding"] == b"binary/encrypted" and first.metadata[KEY_ID] == b"k1"
    assert b"secret" not in first.data and first.data != second.data
    assert await codec.decode([first, second]) == [original, original]
    assert await codec.decode([original]) == [original]  # unencrypted payloads pass through


async def test_rotation_keeps_old_payloads_readable_and_missing_keys_are_named():
    old_key, new = new_key(), new_key()
    written = (await EncryptionCodec({"k1": old_key}).encode([plain_payload("x")]))[0]
    rotated = EncryptionCodec.from_spec(spec(k2=new, k1=old_key))
    assert rotated.current == "k2"
    assert (await rotated.encode([plain_payload("y")]))[0].metadata[KEY_ID] == b"k2"
    assert await rotated.decode([written]) == [plain_payload("x")]
    with pytest.raises(CodecKeyError, match="key id 'k1', which is not in RATCHET_CODEC_KEYS"):
        await EncryptionCodec({"k2": new}).decode([written])
    with pytest.raises(CodecKeyError, match="wrong key"):
        await EncryptionCodec({"k1": new}).decode([written])


def test_bad_keys_fail_naming_the_variable(monkeypatch):
    monkeypatch.setenv("RATCHET_CODEC_KEYS", "k1:" + base64.b64encode(b"short").decode())
    with pytest.raises(SettingsError, match="RATCHET_CODEC_KEYS: .*'k1' is 5 bytes"):
        load_settings()
    monkeypatch.setenv("RATCHET_CODEC_KEYS", spec(k1=new_key()))
    assert payload_codec(load_settings()).key_ids == ["k1"]
    monkeypatch.delenv("RATCHET_CODEC_KEYS")
    assert payload_codec(Settings()) is None  # encryption off by default (offload is on)


# ---- a run on the dev server ---------------------------------------------------------------


@pytest.fixture
async def encrypted(dev_server, settings):
    """An encrypting client and an in-process worker on their own task queue."""
    keyed = settings.model_copy(
        update={"codec_keys": SecretStr(spec(k1=new_key())), "task_queue": f"{settings.task_queue}-enc"}
    )
    enc_client = await Client.connect(dev_server.address, data_converter=data_converter(keyed))
    async with build_worker(enc_client, keyed):
        yield enc_client, keyed


def secret_run(marker: str) -> dict:
    script = [
        {"tool_calls": [{"name": "write_file", "arguments": {"path": "notes.txt", "content": f"pin {marker}"}}]},
        {"tool_calls": [
            {"name": "read_file", "arguments": {"path": "notes.txt"}},
            {"name": "read_file", "arguments": {"path": f"gone-{marker}.txt"}},
        ]},
        {"content": f"the pin is {marker}"},
    ]
    return scripted("probe", script, objective=f"find the pin {marker}", workspace="w")


async def raw_history(dev_server, workflow_id: str) -> tuple[bytes, str]:
    """The history as the server stores it, read without any codec."""
    plain = await Client.connect(dev_server.address)
    history = await plain.get_workflow_handle(workflow_id).fetch_history()
    return b"".join(event.SerializeToString() for event in history.events), history.to_json()


async def test_secrets_in_input_tool_results_and_failures_never_reach_the_server(
    dev_server, client, settings, worker, encrypted, openai_server
):
    marker = f"secret-{uuid.uuid4().hex}"
    enc_client, keyed = encrypted

    handle = await start(enc_client, keyed, secret_run(marker))
    result = await handle.result()
    assert result.phase == Phase.DONE and marker in result.answer
    outputs = [r.result.output for r in (await handle.state()).calls.tool_calls.items]
    assert outputs[1] == f"pin {marker}" and f"gone-{marker}.txt: no such file" in outputs[2]

    api_key = os.environ["OPENAI_API_KEY"]
    openai_server.enqueue_faults([{"status": 401, "message": f"key rejected {marker}"}], key=api_key)
    failed = await start(enc_client, keyed, {"agent": "probe", "objective": "x"})
    with pytest.raises(RunFailed) as failure:
        await failed.result()
    assert marker in str(failure.value.reason)

    for workflow_id in (handle.workflow_id, failed.workflow_id):
        raw, as_json = await raw_history(dev_server, workflow_id)
        assert b"binary/encrypted" in raw
        assert marker.encode() not in raw and marker not in as_json
    assert "Encoded failure" in (await raw_history(dev_server, failed.workflow_id))[1]

    control = await start(client, settings, secret_run(marker))  # same run, no codec: it leaks
    await control.result()
    assert marker.encode() in (await raw_history(dev_server, control.workflow_id))[0]


# ---- the codec server ----------------------------------------------------------------------


def post(url: str, body: dict | None = None, method: str = "POST", **headers: str) -> tuple[int, Message, bytes]:
    """Status, headers (an email.message.Message: names case-insensitive, as HTTP's are) and body."""
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": "application/json", **headers})
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return response.status, response.headers, response.read()
    except urllib.error.HTTPError as err:
        return err.code, err.headers, err.read()


def b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode()


def keyed_converter(artifact_dir, claim_check_bytes: int = 256 * 1024):
    """The workers' converter with a fresh key, offloading to `artifact_dir`."""
    keys = SecretStr(spec(k1=new_key()))
    return data_converter(Settings(codec_keys=keys, artifact_dir=artifact_dir, claim_check_bytes=claim_check_bytes))


def reference_of(sealed: dict) -> ExternalStorageReference | None:
    """The external-storage reference a protobuf-JSON payload is, if it is one."""
    metadata = {k: base64.b64decode(v) for k, v in sealed["metadata"].items()}
    if metadata.get("messageType") != ExternalStorageReference.DESCRIPTOR.full_name.encode():
        return None
    return JSONProtoPayloadConverter().from_payload(Payload(metadata=metadata, data=base64.b64decode(sealed["data"])))


def test_codec_server_speaks_the_remote_codec_protocol(tmp_path):
    body = {"payloads": [{"metadata": {"encoding": b64(b"json/plain")}, "data": b64(b'"top secret"')}]}
    converter = keyed_converter(tmp_path / "artifacts")
    with CodecServer(converter, port=0, cors_origins=("http://ui.test",), namespace="default", encode=True) as server:
        status, _, encoded = post(f"{server.url}/encode", body, **{"X-Namespace": "default"})
        assert status == 200 and b"top secret" not in encoded
        sealed = json.loads(encoded)["payloads"][0]
        assert base64.b64decode(sealed["metadata"]["encoding"]) == b"binary/encrypted"
        status, _, decoded = post(f"{server.url}/default/decode", json.loads(encoded))
        assert status == 200 and json.loads(decoded) == body
        status, _, text = post(f"{server.url}/decode", json.loads(encoded), **{"X-Namespace": "other"})
        assert status == 403 and b"'other'" in text
        sealed["metadata"][KEY_ID] = b64(b"k9")
        status, _, text = post(f"{server.url}/decode", {"payloads": [sealed]})
        assert status == 400 and b"'k9'" in text
        status, headers, _ = post(f"{server.url}/decode", method="OPTIONS", Origin="http://ui.test")
        assert status == 204 and headers["Access-Control-Allow-Origin"] == "http://ui.test"
        assert headers["Access-Control-Allow-Headers"] == "X-Namespace, Content-Type, Authorization"
        assert headers["Access-Control-Allow-Credentials"] == "true"
        status, headers, _ = post(f"{server.url}/decode", method="OPTIONS", Origin="http://evil.test")
        assert status == 403 and "Access-Control-Allow-Origin" not in headers


def test_codec_server_resolves_offloaded_payloads_and_shows_a_missing_one_as_its_reference(tmp_path):
    store = DirectoryArtifactStore(tmp_path / "artifacts")
    converter = keyed_converter(store.root, claim_check_bytes=1024)
    large = {"metadata": {"encoding": b64(b"json/plain")}, "data": b64(json.dumps("x" * 5000 + "secret tail").encode())}
    small = {"metadata": {"encoding": b64(b"json/plain")}, "data": b64(b'"short"')}
    with CodecServer(converter, port=0, encode=True) as server:
        status, _, encoded = post(f"{server.url}/encode", {"payloads": [large, small]})
        sealed, sealed_small = json.loads(encoded)["payloads"]
        assert status == 200 and reference_of(sealed).driver_name == DRIVER_NAME, "encrypted, then offloaded"
        assert base64.b64decode(sealed_small["metadata"]["encoding"]) == b"binary/encrypted"
        assert b"secret tail" not in b"".join(p.read_bytes() for p in store.root.rglob("*") if p.is_file())
        status, _, decoded = post(f"{server.url}/decode", {"payloads": [sealed, sealed_small]})
        assert status == 200 and json.loads(decoded)["payloads"] == [large, small]
        for blob in store.root.rglob("*"):
            if blob.is_file():
                blob.unlink()
        status, _, decoded = post(f"{server.url}/decode", {"payloads": [sealed, sealed_small]})
        assert status == 200 and json.loads(decoded)["payloads"] == [sealed, small], "the reference, and the rest"
        junk = store.put(b"not a payload")
        claim = ExternalStorageReference(driver_name=DRIVER_NAME, claim_data={"digest": junk.digest})
        not_a_payload = json.loads(json_format.MessageToJson(JSONProtoPayloadConverter().to_payload(claim)))
        status, _, decoded = post(f"{server.url}/decode", {"payloads": [not_a_payload, sealed_small]})
        assert status == 200 and json.loads(decoded)["payloads"] == [not_a_payload, small]


async def test_codec_server_decodes_what_a_worker_offloaded(tmp_path):
    """A payload the workers' converter offloaded (not the server's /encode) decodes through the
    server, in the protobuf JSON the Web UI sends (`externalPayloads` included)."""
    converter = keyed_converter(tmp_path / "artifacts", claim_check_bytes=1024)
    [offloaded] = await converter.encode(["y" * 5000 + "secret tail"])
    assert offloaded.external_payloads, "the SDK records the offloaded size on the reference"
    as_sent = json.loads(json_format.MessageToJson(Payloads(payloads=[offloaded])))
    assert reference_of(as_sent["payloads"][0]) is not None and "externalPayloads" in as_sent["payloads"][0]
    with CodecServer(converter, port=0) as server:
        status, _, decoded = await asyncio.to_thread(post, f"{server.url}/decode", as_sent)
    assert status == 200, decoded
    [payload] = json_format.Parse(decoded, Payloads()).payloads
    assert payload.metadata["encoding"] == b"json/plain" and json.loads(payload.data) == "y" * 5000 + "secret tail"


async def temporal_show(dev_server, workflow_id: str, *extra: str, status: int | None = 0) -> str:
    """`temporal workflow show`'s output; `status`: the exit status it must have (None: any)."""
    proc = await asyncio.create_subprocess_exec(
        temporal_binary(), "workflow", "show", "-w", workflow_id, "--address", dev_server.address, "--detailed", *extra,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
    )
    out, _ = await proc.communicate()
    assert status is None or proc.returncode == status, out.decode()
    return out.decode()


async def test_temporal_cli_decrypts_through_the_codec_server(dev_server, encrypted):
    enc_client, keyed = encrypted
    marker = f"secret-{uuid.uuid4().hex}"
    handle = await start(enc_client, keyed, secret_run(marker))
    await handle.result()
    with CodecServer(data_converter(keyed), port=0, namespace="default") as server:
        assert marker in await temporal_show(dev_server, handle.workflow_id, "--codec-endpoint", server.url)
    assert marker not in await temporal_show(dev_server, handle.workflow_id)


async def test_temporal_cli_passes_the_codec_servers_token(dev_server, encrypted):
    """`temporal --codec-auth` sends the Authorization header a token-protected codec server needs."""
    enc_client, keyed = encrypted
    marker = f"secret-{uuid.uuid4().hex}"
    handle = await start(enc_client, keyed, secret_run(marker))
    await handle.result()
    token = uuid.uuid4().hex
    with CodecServer(data_converter(keyed), port=0, namespace="default", token=token) as server:
        shown = await temporal_show(dev_server, handle.workflow_id, "--codec-endpoint", server.url, "--codec-auth", f"Bearer {token}")
        assert marker in shown
        # refused (401), the CLI retries until its deadline, then fails: no plaintext either way
        shown = await temporal_show(dev_server, handle.workflow_id, "--codec-endpoint", server.url, "--codec-auth", "Bearer wrong",
                                    "--command-timeout", "3s", status=1)
        assert marker not in shown and "failed" in shown


async def test_temporal_cli_shows_offloaded_payloads_through_the_codec_server(dev_server, settings):
    """History holds only references for the large payloads of this run (encrypted blobs in the
    artifact store); the CLI, through the codec server, shows their plaintext."""
    marker = f"secret-{uuid.uuid4().hex}"
    keyed = settings.model_copy(update={
        "codec_keys": SecretStr(spec(k1=new_key())), "claim_check_bytes": 16 * 1024, "task_queue": f"{settings.task_queue}-big",
    })
    content = "filler line\n" * 4000 + marker
    script = [{"tool_calls": [{"name": "write_file", "arguments": {"path": "big.txt", "content": content}}]},
              {"content": "wrote it"}]
    enc_client = await Client.connect(dev_server.address, data_converter=data_converter(keyed))
    async with build_worker(enc_client, keyed):
        handle = await start(enc_client, keyed, scripted("probe", script, workspace="w"))
        assert (await handle.result()).phase == Phase.DONE
    raw, _ = await raw_history(dev_server, handle.workflow_id)
    assert ExternalStorageReference.DESCRIPTOR.full_name.encode() in raw and marker.encode() not in raw
    with CodecServer(data_converter(keyed), port=0, namespace="default") as server:
        assert marker in await temporal_show(dev_server, handle.workflow_id, "--codec-endpoint", server.url)
    assert marker not in await temporal_show(dev_server, handle.workflow_id)


# ---- without keys, and a start that bypasses the codec ----------------------------------------


async def ratchet_cli(dev_server, *args: str) -> tuple[int, str]:
    env = {k: v for k, v in os.environ.items() if k != "RATCHET_CODEC_KEYS"}
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "ratchet.cli.main", *args, env={**env, "TEMPORAL_ADDRESS": dev_server.address},
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
    )
    out, _ = await proc.communicate()
    return proc.returncode, out.decode()


async def test_the_cli_without_keys_says_which_setting_is_missing(dev_server, encrypted):
    enc_client, keyed = encrypted
    handle = await start(enc_client, keyed, secret_run(uuid.uuid4().hex))
    await handle.result()
    verbs = (["watch", handle.workflow_id, "--once"], ["checkpoints", handle.workflow_id])
    for code, out in await asyncio.gather(*(ratchet_cli(dev_server, *verb) for verb in verbs)):
        assert code == 2 and "Traceback" not in out, out
        [line] = out.strip().splitlines()
        assert "encrypted" in line and "RATCHET_CODEC_KEYS is not set" in line, line


async def cli_start(dev_server, queue: str, wid: str, run: dict, *extra: str) -> None:
    proc = await asyncio.create_subprocess_exec(
        temporal_binary(), "workflow", "start", "--address", dev_server.address, "--type", AGENT_WORKFLOW,
        "--task-queue", queue, "--workflow-id", wid, "--input", json.dumps(run), *extra,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
    )
    out, _ = await proc.communicate()
    assert proc.returncode == 0, out.decode()


async def test_a_worker_with_keys_warns_of_a_start_input_in_cleartext(dev_server, encrypted, caplog):
    """The plain CLI's start is stored in clear and the worker says so; through the codec server it is not."""
    enc_client, keyed = encrypted
    plain, sealed = f"cleartext-{uuid.uuid4().hex[:8]}", f"sealed-{uuid.uuid4().hex[:8]}"
    marker = {wid: f"secret-{uuid.uuid4().hex}" for wid in (plain, sealed)}
    with caplog.at_level(logging.WARNING, logger="ratchet.payloads.codec"):
        await cli_start(dev_server, keyed.task_queue, plain, secret_run(marker[plain]))
        with CodecServer(data_converter(keyed), port=0, namespace="default", encode=True) as server:
            await cli_start(dev_server, keyed.task_queue, sealed, secret_run(marker[sealed]), "--codec-endpoint", server.url)
        for wid in (plain, sealed):
            assert (await runs(enc_client, keyed).get(wid).result()).phase == Phase.DONE
    warnings = [r.getMessage() for r in caplog.records if r.name == "ratchet.payloads.codec"]
    assert any(plain in w and "cleartext" in w and "--codec-endpoint" in w for w in warnings), warnings
    assert not any(sealed in w for w in warnings), warnings
    assert marker[plain].encode() in (await raw_history(dev_server, plain))[0]
    assert marker[sealed].encode() not in (await raw_history(dev_server, sealed))[0]
