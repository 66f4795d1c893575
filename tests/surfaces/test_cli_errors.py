"""CLI errors that tell the truth (issue 38): Temporal unreachable (also gone midway), a bad setting,
a closed pipe, a closed run, abbreviations refused; each through the `ratchet` command as a subprocess."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import sys
from datetime import timedelta

import pytest
from temporalio.client import Client

from devtools.devserver import DevServer
from ratchet.client import RunClosed, RunFailed
from ratchet.contracts import Phase
from ratchet.ops.connection import EXIT_UNREACHABLE
from ratchet.payloads.converter import BASE_CONVERTER
from ratchet.worker.main import build_worker
from tests.runs import call, ratchet, runs, scripted, start, wait_for

pytestmark = pytest.mark.e2e  # processes as a user runs them: `make test-e2e`, not `make test`

WRITE_AND_FINISH = [
    {"tool_calls": [{"name": "write_file", "arguments": {"path": "a.txt", "content": "hello"}}]},
    {"content": "wrote a.txt"},
]


def closed_port() -> int:
    """A local port nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


async def ratchet_at(address: str, *args: str) -> tuple[int, str, str]:
    """`ratchet ARGS` against the Temporal service at `address`: exit code, stdout, stderr."""
    env = dict(os.environ, TEMPORAL_ADDRESS=address)
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "ratchet.cli.main", *args, env=env,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    return proc.returncode, out.decode(), err.decode()


@pytest.mark.parametrize("verb", [
    ["list"], ["result", "ops-8"], ["send", "ops-8", "hi"], ["start", "coder", "hi"], ["worker"],
    ["serve", "--port", "0"],
])
async def test_temporal_unreachable_is_one_line_naming_the_address_and_what_to_start(verb, tmp_path):
    address = f"127.0.0.1:{closed_port()}"
    code, out, err = await ratchet_at(address, *verb)
    assert code == EXIT_UNREACHABLE, (code, out, err)
    lines = [line for line in (out + err).splitlines() if line.strip()]
    assert len(lines) == 1, lines
    assert f"cannot reach Temporal at {address} (connection refused)" in lines[0], lines
    assert "temporal server start-dev" in lines[0] and "TEMPORAL_ADDRESS" in lines[0], lines
    assert "Traceback" not in err and "tonic" not in err and "RuntimeError" not in err, err


@pytest.mark.parametrize("verb", [
    ["console", "--port", "0"], ["serve", "--port", "0"], ["list"], ["config"], ["start", "coder", "hi"],
    ["watch", "ops-8"], ["worker"],
])
async def test_a_bad_setting_is_one_line_naming_it_for_every_verb(verb):
    env = dict(os.environ, RATCHET_TEMPORAL_UI_URL="javascript:x")
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "ratchet.cli.main", *verb, env=env,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )
    out, err = (part.decode() for part in await asyncio.wait_for(proc.communicate(), 60))
    assert proc.returncode == 2, (proc.returncode, out, err)
    lines = [line for line in (out + err).splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in err, lines
    prefix = "ratchet worker:" if verb == ["worker"] else "ratchet:"
    assert lines[0].startswith(f"{prefix} invalid settings: RATCHET_TEMPORAL_UI_URL: "), lines
    assert "must be an http:// or https:// URL" in lines[0], lines


async def spawned(env: dict[str, str], *args: str) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        sys.executable, "-m", "ratchet.cli.main", *args, env=env,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )


async def read_until(stream: asyncio.StreamReader, text: str) -> None:
    async with asyncio.timeout(60):
        while text not in (await stream.readline()).decode():
            pass


async def test_temporal_gone_midway_is_one_line_naming_the_address(settings, tmp_path):
    """A server of this test's own stops while `ratchet watch` polls a run's stream and `ratchet
    result` waits for its end: each ends with the line of an unreachable Temporal, exit 69."""
    server = DevServer(db_file=tmp_path / "temporal.db", log_file=tmp_path / "server.log").start()
    try:
        client = await Client.connect(server.address, data_converter=BASE_CONVERTER)
        settings = settings.model_copy(update={"temporal_address": server.address})
        env = dict(os.environ, TEMPORAL_ADDRESS=server.address, RATCHET_TASK_QUEUE=settings.task_queue)
        async with build_worker(client, settings, graceful_shutdown_timeout=timedelta(0)):
            run = await start(client, settings, scripted("probe", [{"content": "hello"}], session={}))
            await wait_for(run, lambda s: s.phase == Phase.AWAITING_MESSAGE)
            watch = await spawned(env, "watch", run.workflow_id)
            result = await spawned(env, "result", run.workflow_id)
            await read_until(watch.stdout, f"[{Phase.AWAITING_MESSAGE}]")  # then it polls for the next event
            await read_until(result.stderr, "waiting for its end")
    finally:
        server.stop()
    for verb, proc in (("watch", watch), ("result", result)):
        _, err = (part.decode() for part in await asyncio.wait_for(proc.communicate(), 90))
        lines = [line for line in err.splitlines() if line.strip()]
        assert proc.returncode == EXIT_UNREACHABLE, (verb, proc.returncode, err)
        assert lines and lines[-1].startswith(f"ratchet: cannot reach Temporal at {server.address} ("), (verb, err)
        assert "Traceback" not in err and "RPCError" not in err and " error" not in err, (verb, err)


async def ratchet_into_closed_pipe(settings, *args: str) -> tuple[int, str]:
    """`ratchet ARGS` whose stdout is a pipe nobody reads any more (`| head -c 0`): exit code, stderr."""
    env = dict(os.environ, TEMPORAL_ADDRESS=settings.temporal_address, RATCHET_TASK_QUEUE=settings.task_queue)
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader went away before the first byte
    try:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "ratchet.cli.main", *args, env=env, stdout=write_end, stderr=asyncio.subprocess.PIPE,
        )
    finally:
        os.close(write_end)
    _, err = await asyncio.wait_for(proc.communicate(), 60)
    return proc.returncode, err.decode()


async def test_every_verb_survives_a_closed_pipe_as_unix_tools_do(client, settings, worker):
    handle = await start(client, settings, scripted("probe", WRITE_AND_FINISH))
    await handle.result()
    run = handle.workflow_id
    for verb in (["list"], ["result", run], ["transcript", run], ["watch", run], ["checkpoints", run]):
        code, err = await ratchet_into_closed_pipe(settings, *verb)
        assert code == -signal.SIGPIPE, (verb, code, err)  # a shell shows 141, as for `seq 1000000 | head -1`
        assert "Traceback" not in err and "BrokenPipe" not in err, (verb, err)


async def test_a_closed_run_says_it_ended_and_how_to_send_approve_and_cancel(client, settings, worker):
    done = await start(client, settings, scripted("probe", WRITE_AND_FINISH))
    await done.result()
    failed = await start(client, settings, scripted("no-such-profile", WRITE_AND_FINISH))
    with pytest.raises(RunFailed):
        await failed.result()
    for run, how in ((done.workflow_id, "DONE (COMPLETED)"), (failed.workflow_id, "FAILED")):
        for verb, then in ((["send", run, "hello?"], "it takes no messages"),
                           (["approve", run, "call_1_0"], "no call of it waits for approval"),
                           (["cancel", run], "there is nothing to cancel")):
            code, out = await ratchet(settings, *verb)
            assert code == 1, (verb, code, out)
            assert out.strip() == f"{run} has ended {how}: {then}", (verb, out)
    with pytest.raises(RunClosed, match="has ended DONE"):  # the client says it, the CLI only prints it
        await runs(client, settings).get(done.workflow_id).send("hello?")


async def test_abbreviated_options_are_refused_under_the_verbs_own_usage():
    code, out, err = await ratchet_at(f"127.0.0.1:{closed_port()}", "start", "coder", "x", "--max-step", "3")
    assert code == 2 and "ratchet start: error: unrecognized arguments: --max-step 3" in err, (code, out, err)
    assert err.startswith("usage: ratchet start "), err
    code, out, err = await ratchet_at(f"127.0.0.1:{closed_port()}", "list", "--lim", "3")
    assert code == 2 and "unrecognized arguments: --lim 3" in err, (code, out, err)


async def test_refusals_say_the_runs_reason_without_python_class_names(client, settings, worker):
    run = await start(client, settings, scripted("saga", [{"tool_calls": [call("probe_wait", seconds=60)]}]))
    await wait_for(run, lambda s: s.step >= 1)
    code, out = await ratchet(settings, "approve", run.workflow_id, "call_9_9")
    assert code == 1 and out.strip() == "approve refused: no pending approval for call 'call_9_9'; pending: none", out
    code, out = await ratchet(settings, "ask", run.workflow_id, "and now?")
    assert code == 1 and out.startswith(f"ask refused: run {run.workflow_id} is not a session"), out
    code, out = await ratchet(settings, "rollback", run.workflow_id, "cp-9")
    assert code == 1 and "Error" not in out, out
    await run.terminate("test over")
    failed = await start(client, settings, scripted("no-such-profile", WRITE_AND_FINISH))
    code, out = await ratchet(settings, "result", failed.workflow_id)
    assert code == 1 and "InvalidInput: agent: unknown profile 'no-such-profile'" in out, out
