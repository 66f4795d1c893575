"""In-process costs of the model activity's own work, by transcript length (no server).

Each `model.call` takes the conversation so far from its cache (or, on a miss, reads the chain
of transcript segments from the artifact store), writes one segment with the new messages and
the reply (fsync'd), and goes through the SQLite ledger twice (a read of its entry, then `complete`:
one fsync'd commit; a model call does not claim its key, activities/exactly_once.py). The scripted
provider also reads its script each call. The store calls run in a thread, the rest on the event loop.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from pathlib import Path
from statistics import median

from bench.harness import script

LENGTHS = (10, 100, 1000, 5000)
"""Agent steps already in the transcript (two messages each: the tool call and its result)."""


def _timed(fn, repeats: int) -> float:
    """Median milliseconds of `fn()` over `repeats` calls."""
    times = []
    for i in range(repeats):
        began = time.perf_counter()
        fn(i)
        times.append((time.perf_counter() - began) * 1000)
    return median(times)


def _transcript(store, steps: int):
    """A run's transcript after `steps` steps, written as its model calls write it (one segment
    per call): its digest and the conversation."""
    from ratchet.stores import transcripts
    from ratchet.contracts import Message

    new = [Message(role="system", content="You are a benchmark agent."), Message(role="user", content="bench")]
    digest, base = None, transcripts.Conversation()
    for i in range(steps):
        new.append(Message.model_validate({"role": "assistant", "tool_calls": [
            {"id": f"call_{i + 1}_0", "name": "bench_echo", "arguments": f'{{"text": "{i}"}}'}]}))
        ref = transcripts.write(store, base, new, prev=digest)
        digest, base = ref.digest, base.extended(new, ref.digest, ref.size or 0, None)
        new = [Message(role="tool", tool_call_id=f"call_{i + 1}_0", content=f"echo {i}")]
    return digest, base


async def model_call_costs(lengths=LENGTHS, repeats: int = 7) -> list[dict[str, float]]:
    import dataclasses

    from temporalio.testing import ActivityEnvironment

    from ratchet.stores.ledger import SqliteLedger
    from ratchet.activities.model import ModelActivities
    from ratchet.models.builtin import builtin_providers
    from ratchet.stores import transcripts
    from ratchet.stores.artifacts import DirectoryArtifactStore, get_json, put_json
    from ratchet.contracts import Message, ModelCallConfig, ModelRequest, ModelSettings

    root = Path(tempfile.mkdtemp(prefix="bench-micro-"))
    store, ledger = DirectoryArtifactStore(root / "artifacts"), SqliteLedger(root / "ledger.sqlite3")
    model = ModelActivities(builtin_providers(store), store, ledger)
    env = ActivityEnvironment()
    rows = []
    for steps in lengths:
        digest, base = _transcript(store, steps)
        script_ref = put_json(store, script(steps + 1))
        settings = ModelSettings(  # no run to stream to
            provider="scripted", model="scripted", options={"script_ref": script_ref.model_dump()}, stream=False
        )
        config = ModelCallConfig(settings=settings, tools=[])
        call_ref = put_json(store, config.model_dump(mode="json")).digest
        new = [Message(role="tool", tool_call_id="x", content="echo")]
        calls = []
        for i in range(repeats):
            request = ModelRequest(step=steps + 1, call_ref=call_ref, transcript=digest, new_messages=new)
            env.info = dataclasses.replace(env.info, workflow_id=f"micro-{steps}-{i}")  # the call's ledger key
            began = time.perf_counter()
            await env.run(model.call, request)
            calls.append((time.perf_counter() - began) * 1000)
        rows.append({
            "steps": steps, "transcript_kib": base.size / 1024,
            "model_call_ms": median(calls),
            "ledger_ms": _timed(lambda i: (ledger.get(f"l/{steps}/{i}"), ledger.complete(f"l/{steps}/{i}", {})), repeats),
            "transcript_read_ms": _timed(lambda i: transcripts.read(store, digest), repeats),
            "transcript_write_ms": _timed(
                lambda i: transcripts.write(store, base, [Message(role="user", content=str(i))], prev=digest), repeats),
            "script_read_ms": _timed(lambda i: get_json(store, script_ref), repeats),
        })
    rows.append({"fsync_ms": _timed(lambda i: _fsync(root / f"f{i}"), repeats)})
    shutil.rmtree(root, ignore_errors=True)
    return rows


def _fsync(path: Path) -> None:
    with open(path, "wb") as out:
        out.write(b"x")
        out.flush()
        os.fsync(out.fileno())
