"""Every `ratchet` verb: its name, one-line help, example, the arguments it takes, and the function
that runs it (`module:function`, imported only when the verb runs). This module imports nothing but
argparse, so `ratchet --help` and parsing a verb's command line stay cheap; the few argument helps
that quote the contracts import them when that verb is named, not before."""

from __future__ import annotations

import argparse

from ratchet.cli.verbs import Verb, workflow_id


def _codec_server(cmd: argparse.ArgumentParser) -> None:
    cmd.add_argument("--port", type=int, default=8081, help="default: %(default)s")
    cmd.add_argument("--host", default="127.0.0.1", help="default: %(default)s")
    cmd.add_argument("--cors-origin", default="http://localhost:8080", help="Web UI origin(s), comma-separated")
    cmd.add_argument(
        "--allowed-host",
        default="",
        help="host names it answers for besides the loopback names and --host, comma-separated",
    )
    cmd.add_argument(
        "--encode",
        action="store_true",
        help="answer /encode too (for `temporal workflow start --codec-endpoint`); off: anyone "
        "who reaches it could seal inputs with the workers' key",
    )


def _replay(cmd: argparse.ArgumentParser) -> None:
    from ratchet.replay.gate import DEFAULT_QUERY

    cmd.add_argument("paths", nargs="*", help="JSON history files, or folders of them")
    cmd.add_argument("--server", action="store_true", help="also replay runs from TEMPORAL_ADDRESS")
    cmd.add_argument("--query", default=DEFAULT_QUERY, help=f"visibility query (default: {DEFAULT_QUERY})")
    cmd.add_argument("--limit", type=int, default=100, help="at most this many server runs (default: 100)")
    cmd.add_argument(
        "--min",
        type=int,
        default=0,
        metavar="N",
        help="fail (exit 2) if fewer than N histories replay (default: 0, none is success)",
    )


def _health(cmd: argparse.ArgumentParser) -> None:
    cmd.add_argument("--timeout", type=float, default=5.0, help="seconds per check (default: %(default)s)")


def _migrate_stores(cmd: argparse.ArgumentParser) -> None:
    cmd.add_argument(
        "--from-ledger",
        metavar="URL",
        help="the ledger to copy (default: the one in effect, RATCHET_LEDGER_URL or RATCHET_LEDGER_PATH)",
    )
    cmd.add_argument("--to-ledger", metavar="URL", help="the ledger to copy into, e.g. postgresql://USER:PW@HOST/DB")
    cmd.add_argument(
        "--from-artifacts",
        metavar="URL",
        help="the artifact store to copy (default: the one in effect, RATCHET_ARTIFACT_URL or RATCHET_ARTIFACT_DIR)",
    )
    cmd.add_argument("--to-artifacts", metavar="URL", help="the artifact store to copy into, e.g. s3://BUCKET/PREFIX")
    cmd.add_argument("--dry-run", action="store_true", help="count what would be copied; write nothing")


def _mcp(cmd: argparse.ArgumentParser) -> None:
    cmd.add_argument("--port", type=int, help="serve streamable HTTP on this port instead of stdio")
    cmd.add_argument("--host", default="127.0.0.1", help="with --port (default: %(default)s)")


def _call(cmd: argparse.ArgumentParser) -> None:
    workflow_id(cmd)
    cmd.add_argument("call_id", help="the waiting call (`ratchet watch` lists them)")


def _reject(cmd: argparse.ArgumentParser) -> None:
    _call(cmd)
    cmd.add_argument("--reason", default="rejected by a person", help="what the model is told (default: %(default)r)")


def _message(cmd: argparse.ArgumentParser) -> None:
    workflow_id(cmd)
    cmd.add_argument("text", help="the message")


def _ask(cmd: argparse.ArgumentParser) -> None:
    _message(cmd)
    cmd.add_argument("--message-id", help="the message's id, for a safe retry (default: a new one)")
    cmd.add_argument("--no-wait", action="store_true", help="return at once with the turn to follow")


def _watch(cmd: argparse.ArgumentParser) -> None:
    workflow_id(cmd)
    cmd.add_argument("--once", action="store_true", help="print the run's current view and exit")
    cmd.add_argument(
        "--from-offset", type=int, default=0, help="start at this event of the run's stream (default: the oldest kept)"
    )
    cmd.add_argument(
        "--topics", nargs="+", choices=["tokens", "steps", "answer"], help="only these topics (default: all)"
    )


def _rollback(cmd: argparse.ArgumentParser) -> None:
    from ratchet.contracts import ROLLBACK_WORKFLOW, TO_START

    cmd.description = (  # here, not in VERBS: the workflow's name is the contracts'
        "Undo a run's effects after a checkpoint, newest first, each at most once. A running run "
        "interrupts its step and rolls back; a closed one (DONE, FAILED, cancelled, ...) through a "
        f"{ROLLBACK_WORKFLOW} with id RUN/rollback/CHECKPOINT."
    )
    workflow_id(cmd)
    cmd.add_argument("checkpoint_id", help=f"a checkpoint (`ratchet checkpoints`), or {TO_START!r}: every effect")
    cmd.add_argument(
        "--then",
        choices=["continue", "stop"],
        help="a running run: go on from the checkpoint or stop (default: continue); refused for a closed run",
    )
    cmd.add_argument("--dry-run", action="store_true", help="only print what would be undone")


def _fork(cmd: argparse.ArgumentParser) -> None:
    workflow_id(cmd)
    cmd.add_argument("checkpoint_id", help="the source run's checkpoint (`ratchet checkpoints`)")
    cmd.add_argument("--objective", help="objective for the new run (default: the source's)")
    cmd.add_argument("--new-id", help="workflow id of the new run")


def _start(cmd: argparse.ArgumentParser) -> None:
    cmd.add_argument("agent", nargs="?", help="agent profile registered on the worker (e.g. coder)")
    cmd.add_argument("objective", nargs="?", help="what the agent should achieve")
    cmd.add_argument("--file", help="JSON file with the run (agent, objective, workspace, model, budget, ...)")
    cmd.add_argument("--id", help="workflow id (default: AGENT-<random>)")
    cmd.add_argument("--workspace", help="workspace directory name (default: derived from the workflow id)")
    cmd.add_argument("--max-steps", type=int, help="step budget for this run")
    cmd.add_argument("--provider", help="model provider (openai, anthropic, scripted, ...; default: the worker's)")
    cmd.add_argument("--model", help="the provider's model (e.g. gpt-4o; default: the profile's or provider's)")
    cmd.add_argument(
        "--script",
        metavar="FILE",
        help="a JSON list of the scripted provider's replies (implies --provider scripted: no API key)",
    )
    cmd.add_argument("--new-run", action="store_true", help="start a new run under the id of a run that has ended")
    cmd.add_argument("--session", action="store_true", help="a session: after each answer it waits for `ratchet ask`")
    cmd.add_argument("--follow", action="store_true", help="show the live view until the run ends; exit 0 on DONE")


def _list(cmd: argparse.ArgumentParser) -> None:
    cmd.add_argument("--phase", help="only runs in this phase (RUNNING, AWAITING_APPROVAL, PAUSED, DONE, FAILED, ...)")
    cmd.add_argument("--agent", help="only runs of this agent profile")
    cmd.add_argument("--running", action="store_true", help="only runs still open")
    cmd.add_argument("--limit", type=int, default=50, help="at most this many (default: %(default)s)")


def _result(cmd: argparse.ArgumentParser) -> None:
    workflow_id(cmd)
    cmd.add_argument("--no-wait", action="store_true", help="do not wait for a running run")


def _transcript(cmd: argparse.ArgumentParser) -> None:
    workflow_id(cmd)
    cmd.add_argument("--offset", type=int, default=0, help="first message (default: %(default)s)")
    cmd.add_argument("--limit", type=int, default=50, help="how many (default: %(default)s, at most 1000)")


def _decide(cmd: argparse.ArgumentParser) -> None:
    from ratchet.contracts import OutcomeChoice

    workflow_id(cmd)
    cmd.add_argument("call_id", help="the call (see `ratchet watch` or state.calls.pending_decisions)")
    cmd.add_argument("choice", choices=[c.value for c in OutcomeChoice], help="what happens to the call")
    cmd.add_argument("--result", help="with assume_done: the call's output as the model will see it")
    cmd.add_argument("--reason", default="", help="why (recorded in the run's state)")


def _http_server(cmd: argparse.ArgumentParser, port: int) -> None:
    cmd.add_argument("--port", type=int, default=port, help="default: %(default)s (0: any free port)")
    cmd.add_argument("--host", default="127.0.0.1", help="default: %(default)s")


def _serve(cmd: argparse.ArgumentParser) -> None:
    _http_server(cmd, 8765)
    cmd.add_argument("--cors-origin", default="", help="browser origins that may call it, comma-separated")
    _allowed_host(cmd)


def _console(cmd: argparse.ArgumentParser) -> None:
    _http_server(cmd, 8780)
    _allowed_host(cmd)


def _allowed_host(cmd: argparse.ArgumentParser) -> None:
    cmd.add_argument(
        "--allowed-host", default="", help="host names it answers for besides the loopback names and --host"
    )


def _as_json(cmd: argparse.ArgumentParser) -> None:
    cmd.add_argument("--json", action="store_true", help="as JSON")


def _chat(cmd: argparse.ArgumentParser) -> None:
    cmd.add_argument("workflow_id", nargs="?", help="a session to rejoin")
    cmd.add_argument("--agent", help="the profile of a new session (its first line is the objective)")
    cmd.add_argument("--file", help="JSON with the new session's other fields (model, budget, session settings)")
    cmd.add_argument("--id", help="the new session's workflow id (default: AGENT-<random>)")


def _deploy(cmd: argparse.ArgumentParser) -> None:
    sub = cmd.add_subparsers(dest="deploy_command", required=True, metavar="SUBCOMMAND", help="what to do")
    status = sub.add_parser("status", help="builds, routing, open runs per build, outcomes, the guard")
    _as_json(status)
    check = sub.add_parser("check", help="run here, in BUILD's code: can it take over the runs that would move?")
    check.add_argument("build", help="the candidate build (the code installed here)")
    check.add_argument(
        "--corpus",
        nargs="*",
        metavar="PATH",
        help="recorded histories to replay too (default: tests/histories, if there)",
    )
    _as_json(check)
    ramp = sub.add_parser("ramp", help="send a percentage of new runs (and of moving sessions) to BUILD")
    ramp.add_argument("build", help="a build of the deployment that a worker polls")
    ramp.add_argument("percentage", type=float, help="0-100 (with --guard: its first step)")
    ramp.add_argument(
        "--guard",
        metavar="CRITERIA",
        help="start a guard: 'failure_rate<=0.05, verifier_pass>=0.9, budget_exhausted<=0.1, cost_per_run<=1.2x, "
        "flagged<=0.05' (terms over the ramped build's finished runs; 1.2x: times the current build's)",
    )
    ramp.add_argument("--window", default="30m", help="with --guard: the runs judged, and each step's hold (30m)")
    ramp.add_argument("--steps", default="10,50,100", help="with --guard: ramp steps above PERCENTAGE (10,50,100)")
    ramp.add_argument("--interval", default="30s", help="with --guard: how often it judges (30s)")
    ramp.add_argument("--min-runs", type=int, help="with --guard: finished runs before a criterion is judged (20)")
    promote = sub.add_parser("promote", help="make BUILD current")
    promote.add_argument("build", help="a build of the deployment that a worker polls")
    rollback = sub.add_parser("rollback", help="the previous build current again (during a ramp: the ramp ends)")
    rollback.add_argument(
        "--rerun",
        action="store_true",
        help="roll each open run of the bad build back to its last checkpoint and rerun it on the restored build",
    )
    for parser in (status, check, ramp, promote, rollback):
        parser.epilog = "example: ratchet " + DEPLOY_EXAMPLES[parser.prog.split()[-1]]


def _shadow(cmd: argparse.ArgumentParser) -> None:
    sub = cmd.add_subparsers(
        dest="shadow_command", required=False, metavar="[report|clean]", help="a started batch (default: start one)"
    )
    for name, text in (("report", "compare a batch's shadows with their originals"), ("clean", "delete a batch")):
        sub.add_parser(name, help=text).add_argument("batch", help="the batch id `ratchet shadow` printed")
    for parser in (cmd, sub.choices["report"]):
        parser.add_argument("--json", action="store_true", help="the report as JSON (default: Markdown)")
        parser.add_argument("--fail-if", help="exit 1 if one holds: 'verifier_worse>0, cost_ratio>1.2'")
        parser.add_argument("--wait", type=float, default=600, help="seconds to wait for the shadows to close (600)")
    cmd.add_argument("--runs", nargs="+", metavar="QUERY|ID", help="a visibility query, or workflow ids")
    cmd.add_argument("--profile", help="the candidate: another profile of the worker")
    cmd.add_argument("--model", help="the candidate: PROVIDER:MODEL, or `recorded` (the original's replies)")
    cmd.add_argument("--set", action="append", metavar="FIELD=VALUE", help="a profile field (VALUE or @FILE)")
    cmd.add_argument("--from", dest="from_checkpoint", metavar="CP", help="start from this checkpoint of each run")
    cmd.add_argument("--concurrency", type=int, default=4, help="shadows started at once (4)")
    cmd.add_argument("--budget-usd", type=float, help="each shadow's cost limit")
    cmd.add_argument("--no-wait", action="store_true", help="print the batch id and return")


def _flag(cmd: argparse.ArgumentParser) -> None:
    workflow_id(cmd)
    cmd.add_argument("reason", help="what was wrong (recorded with the flag)")


DEPLOY_EXAMPLES = {
    "status": "deploy status --json",
    "check": "deploy check 0.4.0-3f2a9c1d7e6b",
    "ramp": "deploy ramp 0.4.0-3f2a9c1d7e6b 10 --guard 'failure_rate<=0.05, cost_per_run<=1.2x' --window 30m",
    "promote": "deploy promote 0.4.0-3f2a9c1d7e6b",
    "rollback": "deploy rollback --rerun",
}


CONSOLE_TOKEN_SETTING = "RATCHET_CONSOLE_TOKEN (or RATCHET_SERVE_TOKEN)"

VERBS: tuple[Verb, ...] = (
    Verb(
        "worker",
        "run a worker (settings from the environment, `ratchet config` shows them)",
        "RATCHET_PLUGINS=myteam.tools ratchet worker",
        "ratchet.cli.worker:worker",
    ),
    Verb(
        "config",
        "print the effective settings as JSON, secrets masked",
        "RATCHET_LEDGER_URL=postgresql://... ratchet config",
        "ratchet.cli.worker:config",
    ),
    Verb(
        "codec-server",
        "decrypt payloads for the Web UI and `temporal --codec-endpoint`",
        "RATCHET_CODEC_KEYS=k1:... ratchet codec-server --port 8081",
        "ratchet.payloads.codec_server:main",
        _codec_server,
    ),
    Verb(
        "replay",
        "replay histories against today's workflow code (the deploy gate)",
        "ratchet replay tests/histories\n"
        "         ratchet replay --server --query 'ExecutionStatus=\"Running\"' --min 0",
        "ratchet.replay.gate:main",
        _replay,
    ),
    Verb(
        "health",
        "check that Temporal, the ledger and the artifact store answer (exit 0/1)",
        "ratchet health --timeout 3",
        "ratchet.cli.health:main",
        _health,
        "Connect to what a worker needs, with the worker's settings, one line per check; "
        "exit 0 if every check passes, else 1. The compose worker's healthcheck.",
    ),
    Verb(
        "migrate-stores",
        "copy the ledger and artifacts into other stores (Postgres, S3)",
        "ratchet migrate-stores --to-ledger postgresql://... --to-artifacts s3://bucket/ratchet --dry-run",
        "ratchet.stores.migrate:main",
        _migrate_stores,
    ),
    Verb(
        "mcp",
        "serve run control over MCP (stdio, or streamable HTTP with --port) to an assistant or IDE",
        "ratchet mcp\n         ratchet mcp --port 8765",
        "ratchet.cli.mcp_server:main",
        _mcp,
    ),
    Verb(
        "approve",
        "approve a tool call waiting for a person (AWAITING_APPROVAL)",
        "ratchet approve ops-7 call_3_0",
        "ratchet.cli.runs:approve",
        _call,
    ),
    Verb(
        "reject",
        "reject a tool call waiting for a person; the reason goes to the model",
        "ratchet reject ops-7 call_3_1 --reason 'not during business hours'",
        "ratchet.cli.runs:reject",
        _reject,
    ),
    Verb(
        "send",
        "send the agent a message (it joins the conversation at the next step boundary)",
        "ratchet send ops-7 'also update the runbook'",
        "ratchet.cli.runs:send",
        _message,
    ),
    Verb(
        "ask",
        "ask a session a question and print its answer (the turn's final answer)",
        "ratchet ask chat-7 'and what about the tests?'",
        "ratchet.cli.runs:ask",
        _ask,
        "A session is a run started with `session` (or of a profile with one): it answers turn after "
        "turn. The same --message-id asked again is answered once.",
    ),
    Verb(
        "close",
        "close a session once its turn in flight is answered",
        "ratchet close chat-7",
        "ratchet.cli.runs:close",
        workflow_id,
    ),
    Verb(
        "watch",
        "follow a run live (the model's text, tool calls, approvals, checkpoints) until it ends",
        "ratchet watch ops-7\n         ratchet watch ops-7 --once\n         ratchet watch ops-7 --topics steps answer",
        "ratchet.cli.watch:watch",
        _watch,
    ),
    Verb(
        "checkpoints",
        "list a run's checkpoints with their evidence (tests run, patch)",
        "ratchet checkpoints fix-42",
        "ratchet.cli.runs:checkpoints",
        workflow_id,
    ),
    Verb(
        "rollback",
        "undo a run's effects back to a checkpoint (a running or a closed run)",
        "ratchet rollback fix-42 cp-1 --dry-run\n         ratchet rollback fix-42 cp-1 --then stop",
        "ratchet.cli.runs:rollback",
        _rollback,  # and its description
    ),
    Verb(
        "fork",
        "start a new run from another run's checkpoint (its state and workspace files)",
        "ratchet fork fix-42 cp-1 --objective 'try another approach'",
        "ratchet.cli.runs:fork",
        _fork,
    ),
    Verb(
        "start",
        "start a run (and follow it with --follow)",
        "ratchet start coder 'Create hello.txt' --script examples/hello-script.json --follow   # no API key\n"
        "         ratchet start coder 'make the tests pass' --provider openai --model gpt-4o\n"
        "         ratchet start --file run.json --id ops-7",
        "ratchet.cli.basics:start",
        _start,
        "Start an agent run. AGENT and OBJECTIVE, or --file with the run as JSON (the same object "
        "`temporal workflow start --input` takes; flags override its fields). Without --follow it waits "
        "until the run is planned and exits 1 with the reason if it failed at once (an unknown profile, a "
        "provider that cannot serve). An id a run already has is refused, naming that run; --new-run starts "
        "a new run under the id of a run that has ended.",
    ),
    Verb(
        "list",
        "list runs (newest first)",
        "ratchet list --phase AWAITING_APPROVAL",
        "ratchet.cli.basics:list_runs",
        _list,
        "List agent runs from Temporal's visibility store, with their agent and phase.",
    ),
    Verb(
        "result",
        "wait for a run's result and print it",
        "ratchet result ops-7",
        "ratchet.cli.basics:result",
        _result,
        "Print a run's result (phase, answer, budget used). Exit 0 on DONE, 1 otherwise, 3 with "
        "--no-wait while it still runs.",
    ),
    Verb(
        "cancel",
        "cancel a run (its failure policy applies)",
        "ratchet cancel ops-7",
        "ratchet.cli.basics:cancel",
        workflow_id,
        "Request cancellation: the running step is cancelled and the run ends under its failure policy.",
    ),
    Verb(
        "transcript",
        "print a page of a run's conversation as JSON lines",
        "ratchet transcript ops-7 --offset 0 --limit 20",
        "ratchet.cli.basics:transcript",
        _transcript,
        "Print messages OFFSET..OFFSET+LIMIT of a run's conversation, one JSON object per line; "
        "messages from before a continue-as-new come from the transcript artifact.",
    ),
    Verb(
        "decide",
        "decide on a tool call whose outcome is unknown (AWAITING_DECISION)",
        "ratchet decide ops-7 call_3_0 assume_done --result 'payment P-81 sent'",
        "ratchet.cli.basics:decide",
        _decide,
        "A side-effecting call was interrupted and its tool can neither reconcile nor repeat "
        "safely. Check the target system, then: retry (it did not happen), assume_done (it did; --result "
        "is what the model sees), skip (go on; the model is told) or fail (the failure policy applies).",
    ),
    Verb(
        "serve",
        "serve runs over HTTP: Server-Sent Events per run, and AG-UI for front ends",
        "ratchet serve --port 8765\n         curl -N localhost:8765/runs/ops-7/events",
        "ratchet.cli.serve:serve",
        _serve,
        "GET /runs/ID/events streams a run's events as Server-Sent Events (resume with Last-Event-ID); "
        "POST /agui takes an AG-UI RunAgentInput (starts the thread's run or sends it a message) and answers "
        "with the run as AG-UI events. Loopback by default; any other address needs RATCHET_SERVE_TOKEN.",
    ),
    Verb(
        "console",
        "a web console for the people around an agent: runs, approvals, checkpoints, rollback",
        "ratchet console --port 8780   # then open http://127.0.0.1:8780/",
        "ratchet.cli.console:console",
        _console,
        "Serves server-rendered pages over ratchet.client: runs (filtered, paged), a run (state, "
        "conversation, live tokens, effects, checkpoints with evidence and patch, rollback plan then confirm), "
        "an inbox of pending approvals and decisions, a start form. Every action is a POST with a CSRF token. "
        f"Loopback by default; any other address needs {CONSOLE_TOKEN_SETTING} (a sign-in page asks for it).",
    ),
    Verb(
        "profiles",
        "list the agent profiles a worker here offers (tools, approvals, verifier, budget)",
        "ratchet profiles --json",
        "ratchet.cli.offer:profiles",
        _as_json,
    ),
    Verb(
        "tools",
        "list the tools a worker here offers (effect class, undo, reconcile) and its MCP servers",
        "RATCHET_PLUGINS=mypackage.tools ratchet tools",
        "ratchet.cli.offer:tools",
        _as_json,
    ),
    Verb(
        "deploy",
        "ship a new build to running agents: status, check, ramp, promote, rollback",
        "ratchet deploy status\n"
        "         ratchet deploy check 0.4.0-3f2a9c1d7e6b   # where that build's code is installed\n"
        "         ratchet deploy ramp 0.4.0-3f2a9c1d7e6b 10\n"
        "         ratchet deploy promote 0.4.0-3f2a9c1d7e6b\n"
        "         ratchet deploy rollback --rerun",
        "ratchet.cli.deploy:deploy",
        _deploy,
        "The builds of the Worker Deployment RATCHET_DEPLOYMENT names (default: the task queue's, ratchet). "
        "One-shot runs finish "
        "on the build they started on; sessions move to the current (or ramping) build at their next turn "
        "boundary. `status` shows each build's open runs and outcomes; `check BUILD` (run where BUILD's code "
        "is installed) replays the runs that would move to it; `ramp`, `promote` and `rollback` route new runs. "
        "The Temporal CLI equivalents: docs/OPERATIONS.md, 'Deploying a new version'.",
    ),
    Verb(
        "shadow",
        "what a candidate profile, model or prompt would have done on recorded runs, side effects quarantined",
        "ratchet shadow --runs 'RatchetAgent=\"coder\"' --model recorded --fail-if 'verifier_worse>0'\n"
        "         ratchet shadow --runs coder-1a2b --set system_prompt=@prompt.txt --from cp-2\n"
        "         ratchet shadow report 3f2a9c1d --json\n"
        "         ratchet shadow clean 3f2a9c1d",
        "ratchet.cli.shadow:shadow",
        _shadow,
        "Start, per selected run, a shadow: the same input (or a checkpoint's, --from) with the candidate change, "
        "in a private copy of the run's workspace. Read-only and workspace tools run there; every other call "
        "gets the original's recorded result, or is not executed and reported as quarantined. The report "
        "compares tool calls, answers, verifier verdicts and cost; --fail-if makes it a CI gate (exit 1).",
    ),
    Verb(
        "flag",
        "mark a run's outcome bad (a ramp guard counts it against the run's build)",
        "ratchet flag ops-7 'wrong answer'",
        "ratchet.cli.deploy:flag",
        _flag,
        "Record that a run (running or closed) ended badly, with the reason: a `RatchetFlag` marker naming the "
        "run's build. A ramp guard (`ratchet deploy ramp --guard '... flagged<=0.05'`) counts flagged runs of "
        "the ramped build; the same flag twice is one.",
    ),
    Verb(
        "chat",
        "talk to a session in the terminal: start one (--agent) or rejoin one (ID)",
        "ratchet chat --agent coder\n         ratchet chat chat-7",
        "ratchet.cli.chat:chat",
        _chat,
        "`ratchet chat`: a session in a terminal. `ratchet chat --agent coder` starts one (its first line "
        "is the objective), `ratchet chat ID` rejoins one. Each line is a turn: the answer is shown as the "
        "model writes it (the run's stream), each tool call as a line, and a call that waits for approval "
        "is asked inline (y/N). `/checkpoints` lists the turns' checkpoints, `/rollback CP` goes back to "
        "one (undoing the later turns' effects), `/close` ends the session, `/quit` leaves it open (to "
        "rejoin later). All of it over `ratchet.client`.",
    ),
)
