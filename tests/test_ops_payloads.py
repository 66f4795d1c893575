"""Large payloads go to the artifact store (claim check); credentials never reach history."""

from __future__ import annotations

import base64
import json
import os
import uuid
from datetime import timedelta

import pytest
from pydantic import SecretStr
from temporalio.api.common.v1 import Payload
from temporalio.client import Client, WorkflowFailureError
from ratchet.payloads.converter import BASE_CONVERTER

import tests.plugins.ops  # noqa: F401  (big_output tool, `bulk` profile)
from ratchet.stores.artifacts import DirectoryArtifactStore
from ratchet.payloads.claim_check import ENCODING, ClaimCheckCodec, ClaimCheckError
from ratchet.contracts import AgentResult, Phase
from ratchet.payloads.converter import CodecChain, data_converter
from ratchet.ops.settings import Settings
from tests.plugins.ops import big_text
from tests.runs import scripted, start
from ratchet.worker.main import build_worker
from ratchet.workflows.agent import AgentWorkflow

MiB = 1024 * 1024


def json_payload(value) -> Payload:
    return Payload(metadata={"encoding": b"json/plain"}, data=json.dumps(value).encode())


async def raw_history(dev_server, workflow_id: str) -> tuple[list, str]:
    """The events as the server stores them, read without any codec."""
    plain = await Client.connect(dev_server.address)
    history = await plain.get_workflow_handle(workflow_id).fetch_history()
    return list(history.events), history.to_json()


# ---- the codec ---------------------------------------------------------------------------------


async def test_claim_check_offloads_only_large_payloads_and_brings_them_back(tmp_path):
    store = DirectoryArtifactStore(tmp_path)
    codec = ClaimCheckCodec(store, threshold=1024)
    small, large = json_payload("x" * 100), json_payload("y" * 5000)
    encoded = await codec.encode([small, large, large])
    assert encoded[0] == small
    assert encoded[1].metadata["encoding"] == ENCODING and encoded[1].ByteSize() < 300
    assert encoded[1] == encoded[2], "content-addressed: the same payload is one blob"
    assert len(list(tmp_path.glob("*/*"))) == 1
    assert await codec.decode(encoded) == [small, large, large]


async def test_a_missing_blob_is_an_error_that_names_the_setting(tmp_path):
    encoded = await ClaimCheckCodec(DirectoryArtifactStore(tmp_path / "a"), 10).encode([json_payload("z" * 100)])
    with pytest.raises(ClaimCheckError, match="RATCHET_ARTIFACT_DIR"):
        await ClaimCheckCodec(DirectoryArtifactStore(tmp_path / "b"), 10).decode(encoded)


async def test_with_encryption_the_store_holds_only_ciphertext(tmp_path):
    marker = f"secret-{uuid.uuid4().hex}"
    keys = "k1:" + base64.b64encode(os.urandom(32)).decode()
    settings = Settings(codec_keys=SecretStr(keys), claim_check_bytes=1024, artifact_dir=tmp_path)
    converter = data_converter(settings)
    assert isinstance(converter.payload_codec, CodecChain)
    [encoded] = await converter.encode([marker * 100])
    assert encoded.metadata["encoding"] == ENCODING
    [blob] = list(tmp_path.glob("*/*"))
    assert marker.encode() not in blob.read_bytes() and b"binary/encrypted" in blob.read_bytes()
    assert await converter.decode([encoded]) == [marker * 100]
    assert data_converter(Settings(claim_check_bytes=0)) is BASE_CONVERTER


# ---- a run on the dev server -----------------------------------------------------------------


async def test_ten_mb_tool_output_and_a_three_mb_tool_argument_keep_history_small(dev_server, settings):
    """The tool activity keeps a 10 MiB output as an artifact; a 3 MiB argument the model wrote
    travels in the workflow input (the script), the model reply and the tool input, all over
    Temporal's 2 MB payload limit: the claim check carries them."""
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
        state = await handle.query(AgentWorkflow.state)
    assert result.phase == Phase.DONE and result.answer == "moved it"
    assert (settings.workspace_root / "w" / "big.txt").read_text() == content
    output = state.tool_calls[0].result
    assert output.output_ref is not None and output.output_ref.size == 10 * MiB
    assert DirectoryArtifactStore(settings.artifact_dir).get(output.output_ref).decode() == big_text(10)

    events, as_json = await raw_history(dev_server, handle.id)
    sizes = [event.ByteSize() for event in events]
    assert max(sizes) < 64 * 1024 and sum(sizes) < 256 * 1024, (max(sizes), sum(sizes))
    assert any(ENCODING in event.SerializeToString() for event in events)
    assert content[:1000] not in as_json


# ---- secrets -------------------------------------------------------------------------------


async def test_the_api_key_never_reaches_history_even_when_the_endpoint_quotes_it(
    dev_server, client, settings, worker, openai_server
):
    key = settings.openai_api_key.get_secret_value()
    openai_server.set_script(
        [{"tool_calls": [{"name": "probe_append", "arguments": {"label": "a"}}]}, {"content": "done"}], key=key
    )
    handle = await start(client, settings, {"agent": "probe", "objective": "x", "workspace": "w"})
    assert (await handle.result()).phase == Phase.DONE
    assert openai_server.chat_requests(key=key), "the run used the key"

    openai_server.enqueue_faults([{"status": 401, "message": f"Incorrect API key provided: {key}"}], key=key)
    failed = await start(client, settings, {"agent": "probe", "objective": "x"})
    with pytest.raises(WorkflowFailureError) as failure:
        await failed.result()
    assert "Incorrect API key provided: [REDACTED]" in str(failure.value.cause)

    for workflow_id in (handle.id, failed.id):
        events, as_json = await raw_history(dev_server, workflow_id)
        assert key not in as_json
        assert all(key.encode() not in event.SerializeToString() for event in events)
