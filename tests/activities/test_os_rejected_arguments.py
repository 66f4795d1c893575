"""Arguments the operating system rejects (a NUL byte, a name too long, a file where a directory
is meant, an argv too big to exec) go back to the model as tool errors; the run goes on."""

from __future__ import annotations

from ratchet.contracts import Budget, ErrorType, Phase
from ratchet.core.profiles import AgentProfile, register_profile
from tests.runs import call, scripted, start

PROFILE = "os_edges"
register_profile(AgentProfile(
    name=PROFILE, system_prompt="You test the edges.", budget=Budget(max_steps=10),
    tools=["write_file", "read_file", "list_files", "run_command", "create_ticket", "delegate"],
    allow_irreversible=["run_command"],
))
DEEP = ("d" * 200 + "/") * 25 + "f.txt"  # over PATH_MAX


EXPECTED = [  # (call, what the model must be told)
    (call("run_command", argv=["echo", "a\u0000b"]), "invalid arguments for run_command: argv.1: must be text without NUL"),
    (call("create_ticket", title="t\u0000", body="b"), "invalid arguments for create_ticket: title: must be text without NUL"),
    (call("write_file", path="n" * 300, content="x"), "write_file failed: nnnn"),
    (call("read_file", path=DEEP), "read_file failed: dddd"),
    (call("list_files", path="n" * 300), "list_files failed: nnnn"),
    (call("run_command", argv=["x" * 5000]), "cannot run 'xxxx"),
    (call("run_command", argv=["echo", "y" * 140_000]), "run_command failed: cannot run 'echo': Argument list too long"),
    (call("delegate", agent="probe", objective="x\u0000y"), "objective: Value error, must not contain NUL"),
]


async def test_arguments_the_os_rejects_go_back_to_the_model(client, settings, worker):
    script = [
        {"tool_calls": [c for c, _ in EXPECTED]},
        {"tool_calls": [call("write_file", path="a.txt", content="x")]},
        {"tool_calls": [call("write_file", path="a.txt/b.txt", content="x")]},
        {"content": "done"},
    ]
    handle = await start(client, settings, scripted(PROFILE, script, workspace="edges"))
    result = await handle.result()
    assert result.phase == Phase.DONE, result.last_error
    calls = (await handle.state()).calls.tool_calls.items
    for (sent, told), record in zip(EXPECTED, calls[: len(EXPECTED)], strict=True):
        assert not record.result.ok and told in record.result.output, (sent["name"], record.result.output)
        assert str(settings.workspace_root) not in record.result.output  # paths as the model named them
    assert "File name too long" in calls[2].result.output and "(300 characters)" in calls[2].result.output
    assert calls[0].result.error_type == ErrorType.INVALID_ARGUMENTS
    assert calls[-1].result.output == "write_file failed: a.txt: File exists"
