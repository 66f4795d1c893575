"""Large payloads go to the artifact store (Temporal external storage over Ratchet's artifact store);
credentials never reach history."""

from __future__ import annotations

import base64
import json
import os
import uuid
from datetime import timedelta

import pytest
from google.protobuf import json_format
from pydantic import SecretStr
from temporalio.api.common.v1 import Payload
from temporalio.api.sdk.v1 import ExternalStorageReference
from temporalio.client import Client

import tests.plugins.ops  # noqa: F401  (big_output tool, `bulk` profile)
from ratchet.client import RunFailed
from ratchet.contracts import AgentResult, ArtifactRef, Phase
from ratchet.ops.settings import Settings
from ratchet.payloads.codec import EncryptionCodec
from ratchet.payloads.converter import data_converter, decode_payloads, encode_payloads
from ratchet.payloads.offload import DRIVER_NAME, OffloadedPayloadError
from ratchet.replay.replayer import payloads_in
from ratchet.stores.artifacts import DirectoryArtifactStore
from ratchet.worker.main import build_worker
from tests.plugins.ops import big_text
from tests.runs import scripted, start

MiB = 1024 * 1024
REFERENCE_TYPE = ExternalStorageReference.DESCRIPTOR.full_name.encode()


def json_payload(value) -> Payload:
    return Payload(metadata={"encoding": b"json/plain"}, data=json.dumps(value).encode())


def sized(total: int) -> Payload:
    """A payload whose serialized size is exactly `total` bytes."""
    for n in range(total, 0, -1):
        payload = Payload(metadata={"encoding": b"binary/plain"}, data=b"x" * n)
        if payload.ByteSize() == total:
            return payload
    raise AssertionError(total)


def reference(payload: Payload) -> ExternalStorageReference | None:
    """The SDK's external-storage reference a payload is, if it is one (json/protobuf, by type)."""
    if payload.metadata.get("encoding") != b"json/protobuf" or payload.metadata.get("messageType") != REFERENCE_TYPE:
        return None
    return json_format.Parse(payload.data, ExternalStorageReference())


async def raw_history(dev_server, workflow_id: str) -> tuple[list, str]:
    """The events as the server stores them, read without any codec."""
    plain = await Client.connect(dev_server.address)
    history = await plain.get_workflow_handle(workflow_id).fetch_history()
    return list(history.events), history.to_json()


def offloaded(events: list) -> list[tuple[str, ExternalStorageReference]]:
    """(event type, reference) of every offloaded payload in a history."""
    found = []
    for event in events:
        for payload in payloads_in(event):
            ref = reference(payload)
            if ref is not None:
                found.append((event.WhichOneof("attributes"), ref))
    return found


# ---- the converter -----------------------------------------------------------------------------


async def test_payloads_over_the_threshold_go_to_the_artifact_store_and_come_back(tmp_path):
    converter = data_converter(Settings(claim_check_bytes=1024, artifact_dir=tmp_path))
    small, at_threshold, over = sized(100), sized(1024), sized(1025)
    encoded = await encode_payloads(converter, [small, at_threshold, over, over])
    assert encoded[:2] == [small, at_threshold], "RATCHET_CLAIM_CHECK_BYTES is the largest payload kept inline"
    ref = reference(encoded[2])
    assert ref is not None and ref.driver_name == DRIVER_NAME and set(ref.claim_data) == {"digest"}
    assert encoded[2].external_payloads[0].size_bytes == 1025 and encoded[2].ByteSize() < 300
    assert encoded[2] == encoded[3], "content-addressed: the same payload is one blob"
    [blob] = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert blob.name == ref.claim_data["digest"] and blob.read_bytes() == over.SerializeToString(deterministic=True)
    assert await decode_payloads(converter, encoded) == [small, at_threshold, over, over]
    [value] = await converter.decode(await converter.encode(["y" * 5000]))
    assert value == "y" * 5000


async def test_a_missing_blob_is_an_error_that_names_the_setting(tmp_path):
    writer = data_converter(Settings(claim_check_bytes=10, artifact_dir=tmp_path / "a"))
    reader = data_converter(Settings(claim_check_bytes=10, artifact_dir=tmp_path / "b"))
    encoded = await writer.encode(["z" * 100])
    with pytest.raises(OffloadedPayloadError, match="RATCHET_ARTIFACT_DIR"):
        await reader.decode(encoded)


async def test_with_encryption_the_store_holds_only_ciphertext(tmp_path):
    marker = f"secret-{uuid.uuid4().hex}"
    keys = "k1:" + base64.b64encode(os.urandom(32)).decode()
    converter = data_converter(Settings(codec_keys=SecretStr(keys), claim_check_bytes=1024, artifact_dir=tmp_path))
    assert isinstance(converter.payload_codec, EncryptionCodec) and converter.external_storage is not None
    [encoded] = await converter.encode([marker * 100])
    assert reference(encoded) is not None and marker.encode() not in encoded.SerializeToString()
    [blob] = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert marker.encode() not in blob.read_bytes()
    assert Payload.FromString(blob.read_bytes()).metadata["encoding"] == b"binary/encrypted"
    assert await converter.decode([encoded]) == [marker * 100]


async def test_offload_off_keeps_payloads_inline_and_still_resolves_references(tmp_path):
    offloading = data_converter(Settings(claim_check_bytes=10, artifact_dir=tmp_path / "artifacts"))
    off = data_converter(Settings(claim_check_bytes=0, artifact_dir=tmp_path / "artifacts"))
    untouched = data_converter(Settings(claim_check_bytes=0, artifact_dir=tmp_path / "never"))
    [inline] = await off.encode(["w" * 5000])
    assert reference(inline) is None
    [offloaded_one] = await offloading.encode(["w" * 5000])
    assert reference(offloaded_one) is not None
    assert await off.decode([offloaded_one]) == ["w" * 5000], "turning offload off strands no running workflow"
    assert await untouched.decode([inline]) == ["w" * 5000]
    assert not (tmp_path / "never").exists(), "the store is opened on first use only"


# ---- a run on the dev server -----------------------------------------------------------------


async def test_ten_mb_tool_output_and_a_three_mb_tool_argument_keep_history_small(dev_server, settings):
    """The tool activity keeps a 10 MiB output as an artifact; a 3 MiB argument the model wrote
    travels in the workflow input (the script), the model reply and the tool input, all over
    Temporal's 2 MB payload limit: external storage moves them to the artifact store."""
    content = big_text(3)
    script = [
        {"tool_calls": [{"name": "big_output", "arguments": {"megabytes": 10}}]},
        {"tool_calls": [{"name": "write_file", "arguments": {"path": "big.txt", "content": content}}]},
        {"content": "moved it"},
    ]
    big_client = await Client.connect(dev_server.address, data_converter=data_converter(settings))
    async with build_worker(big_client, settings, graceful_shutdown_timeout=timedelta(0)):
        handle = await start(big_client, settings, scripted("bulk", script, workspace="w"))
        result: AgentResult = await handle.result()
        state = await handle.state()
    assert result.phase == Phase.DONE and result.answer == "moved it"
    assert (settings.workspace_root / "w" / "big.txt").read_text() == content
    output = state.calls.tool_calls.items[0].result
    assert output.output_ref is not None and output.output_ref.size == 10 * MiB
    store = DirectoryArtifactStore(settings.artifact_dir)
    assert store.get(output.output_ref).decode() == big_text(10)

    events, as_json = await raw_history(dev_server, handle.workflow_id)
    sizes = [event.ByteSize() for event in events]
    assert max(sizes) < 64 * 1024 and sum(sizes) < 256 * 1024, (max(sizes), sum(sizes))
    assert content[:1000] not in as_json
    refs = offloaded(events)
    where = {kind for kind, _ in refs}
    assert {"workflow_execution_started_event_attributes", "activity_task_completed_event_attributes",
            "activity_task_scheduled_event_attributes"} <= where, where
    for _, ref in refs:
        assert ref.driver_name == DRIVER_NAME
        blob = Payload.FromString(store.get(ArtifactRef(digest=ref.claim_data["digest"])))
        assert blob.metadata["encoding"] == b"json/plain" and blob.ByteSize() > settings.claim_check_bytes


async def test_an_encrypted_run_offloads_only_ciphertext(dev_server, settings):
    marker = f"secret-{uuid.uuid4().hex}"
    keyed = settings.model_copy(update={
        "codec_keys": SecretStr("k1:" + base64.b64encode(os.urandom(32)).decode()), "claim_check_bytes": 16 * 1024,
    })
    content = ("filler line\n" * 4000) + marker
    script = [{"tool_calls": [{"name": "write_file", "arguments": {"path": "big.txt", "content": content}}]},
              {"content": "wrote it"}]
    enc_client = await Client.connect(dev_server.address, data_converter=data_converter(keyed))
    async with build_worker(enc_client, keyed, graceful_shutdown_timeout=timedelta(0)):
        handle = await start(enc_client, keyed, scripted("bulk", script, workspace="w"))
        assert (await handle.result()).answer == "wrote it"
    assert (keyed.workspace_root / "w" / "big.txt").read_text() == content

    events, as_json = await raw_history(dev_server, handle.workflow_id)
    assert marker not in as_json
    refs = offloaded(events)
    assert len(refs) >= 3, refs  # the run input, the model reply, the tool input
    store = DirectoryArtifactStore(keyed.artifact_dir)
    for _, ref in refs:
        raw = store.get(ArtifactRef(digest=ref.claim_data["digest"]))
        assert marker.encode() not in raw and Payload.FromString(raw).metadata["encoding"] == b"binary/encrypted"


# ---- secrets -------------------------------------------------------------------------------


async def test_the_api_key_never_reaches_history_even_when_the_endpoint_quotes_it(
    dev_server, client, settings, worker, openai_server
):
    key = os.environ["OPENAI_API_KEY"]
    openai_server.set_script(
        [{"tool_calls": [{"name": "probe_append", "arguments": {"label": "a"}}]}, {"content": "done"}], key=key
    )
    handle = await start(client, settings, {"agent": "probe", "objective": "x", "workspace": "w"})
    assert (await handle.result()).phase == Phase.DONE
    assert openai_server.chat_requests(key=key), "the run used the key"

    openai_server.enqueue_faults([{"status": 401, "message": f"Incorrect API key provided: {key}"}], key=key)
    failed = await start(client, settings, {"agent": "probe", "objective": "x"})
    with pytest.raises(RunFailed) as failure:
        await failed.result()
    assert "Incorrect API key provided: [REDACTED]" in str(failure.value.reason)

    for workflow_id in (handle.workflow_id, failed.workflow_id):
        events, as_json = await raw_history(dev_server, workflow_id)
        assert key not in as_json
        assert all(key.encode() not in event.SerializeToString() for event in events)


async def test_the_model_sees_the_start_and_end_of_a_long_tool_output(client, settings, worker, openai_server):
    """A tool output over the profile's `tool_output_chars` (32,000 by default) reaches the model
    cut to its start and its end around a note naming the artifact that holds it all."""
    key = os.environ["OPENAI_API_KEY"]
    openai_server.set_script([{"tool_calls": [{"name": "big_output", "arguments": {"megabytes": 0.5}}]},
                              {"content": "read it"}], key=key)
    handle = await start(client, settings, {"agent": "bulk", "objective": "read a lot"})
    assert (await handle.result()).answer == "read it"
    seen = openai_server.chat_requests(key=key)[-1].json["messages"][-1]["content"]
    full, ref = big_text(0.5), (await handle.state()).calls.tool_calls.items[0].result.output_ref
    assert ref is not None and DirectoryArtifactStore(settings.artifact_dir).get(ref).decode() == full
    note = f"\n[... {len(full) - 32_000:,} characters left out here; the whole output ({len(full):,} characters) is artifact sha256:{ref.digest} ...]\n"
    assert seen == full[:24_000] + note + full[-8_000:]
