"""The arguments of each `ratchet` verb (ratchet/cli/table.py names the verbs and these): one function
per verb, given the verb's parser. Like the table, this module imports nothing but argparse; the few
helps that quote the contracts or the replay gate import them when that verb is named, not before."""

from __future__ import annotations

import argparse

from ratchet.cli.verbs import seconds, workflow_id


def codec_server(cmd: argparse.ArgumentParser) -> None:
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


def replay(cmd: argparse.ArgumentParser) -> None:
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


def health(cmd: argparse.ArgumentParser) -> None:
    cmd.add_argument("--timeout", type=float, default=5.0, help="seconds per check (default: %(default)s)")


def migrate_stores(cmd: argparse.ArgumentParser) -> None:
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


def mcp(cmd: argparse.ArgumentParser) -> None:
    cmd.add_argument("--port", type=int, help="serve streamable HTTP on this port instead of stdio")
    cmd.add_argument("--host", default="127.0.0.1", help="with --port (default: %(default)s)")


def call(cmd: argparse.ArgumentParser) -> None:
    workflow_id(cmd)
    cmd.add_argument("call_id", help="the waiting call (`ratchet watch` lists them)")


def approve(cmd: argparse.ArgumentParser) -> None:
    workflow_id(cmd)
    cmd.add_argument("call_ids", nargs="+", metavar="CALL", help="the waiting calls, each decided on its own")
    cmd.add_argument(
        "--grant",
        type=seconds,
        metavar="DURATION",
        help="also approve later calls of the same tools for this long, in this run (30m, 1h, 1d)",
    )


def reject(cmd: argparse.ArgumentParser) -> None:
    call(cmd)
    cmd.add_argument("--reason", default="rejected by a person", help="what the model is told (default: %(default)r)")


def audit(cmd: argparse.ArgumentParser) -> None:
    workflow_id(cmd)
    cmd.add_argument("--verify", action="store_true", help="check every signature and digest; exit 1 on any mismatch")
    cmd.add_argument("--history", help="check this exported history (JSON, `temporal workflow show -o json`) instead")


def message(cmd: argparse.ArgumentParser) -> None:
    workflow_id(cmd)
    cmd.add_argument("text", help="the message")


def ask(cmd: argparse.ArgumentParser) -> None:
    message(cmd)
    cmd.add_argument("--message-id", help="the message's id, for a safe retry (default: a new one)")
    cmd.add_argument("--no-wait", action="store_true", help="return at once with the turn to follow")


def watch(cmd: argparse.ArgumentParser) -> None:
    workflow_id(cmd)
    cmd.add_argument("--once", action="store_true", help="print the run's current view and exit")
    cmd.add_argument(
        "--from-offset", type=int, default=0, help="start at this event of the run's stream (default: the oldest kept)"
    )
    cmd.add_argument(
        "--topics", nargs="+", choices=["tokens", "steps", "answer"], help="only these topics (default: all)"
    )


def rollback(cmd: argparse.ArgumentParser) -> None:
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


def fork(cmd: argparse.ArgumentParser) -> None:
    workflow_id(cmd)
    cmd.add_argument("checkpoint_id", help="the source run's checkpoint (`ratchet checkpoints`)")
    cmd.add_argument("--objective", help="objective for the new run (default: the source's)")
    cmd.add_argument("--new-id", help="workflow id of the new run")


def start(cmd: argparse.ArgumentParser) -> None:
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
    cmd.add_argument("--tenant", help="who the run is for (at most 64 bytes): fair dispatch and open-run limits")
    cmd.add_argument("--priority", type=int, help="1 (most urgent) to 5 (default 3)")
    cmd.add_argument("--follow", action="store_true", help="show the live view until the run ends; exit 0 on DONE")


def list_runs(cmd: argparse.ArgumentParser) -> None:
    cmd.add_argument("--phase", help="only runs in this phase (RUNNING, AWAITING_APPROVAL, PAUSED, DONE, FAILED, ...)")
    cmd.add_argument("--agent", help="only runs of this agent profile")
    cmd.add_argument("--running", action="store_true", help="only runs still open")
    cmd.add_argument("--tenant", help="only runs of this tenant")
    cmd.add_argument("--limit", type=int, default=50, help="at most this many (default: %(default)s)")


def inbox(cmd: argparse.ArgumentParser) -> None:
    which = cmd.add_mutually_exclusive_group()
    which.add_argument("--person", help="only runs handed to this person (person:NAME in a profile's handoffs)")
    which.add_argument("--role", help="only runs handed to this role (role:NAME)")
    cmd.add_argument("--limit", type=int, default=50, help="at most this many (default: %(default)s)")


def respond(cmd: argparse.ArgumentParser) -> None:
    workflow_id(cmd)
    how = cmd.add_mutually_exclusive_group(required=True)
    how.add_argument("--finish", metavar="ANSWER", help="finish the task: ANSWER is the run's answer")
    how.add_argument("--reply", metavar="TEXT", help="a message back to the agent, which goes on")
    how.add_argument("--hand-back", metavar="PROFILE", help="hand the task back to this agent profile")
    cmd.add_argument("--notes", help="with --hand-back: what the agent is told (required)")
    cmd.add_argument("--constraint", action="append", default=[], help="with --hand-back: a constraint (repeatable)")
    cmd.add_argument("--question", action="append", default=[], help="with --hand-back: an open question (repeatable)")
    cmd.add_argument("--by", help="who answers (default: this client's identity)")


def result(cmd: argparse.ArgumentParser) -> None:
    workflow_id(cmd)
    cmd.add_argument("--no-wait", action="store_true", help="do not wait for a running run")


def transcript(cmd: argparse.ArgumentParser) -> None:
    workflow_id(cmd)
    cmd.add_argument("--offset", type=int, default=0, help="first message (default: %(default)s)")
    cmd.add_argument("--limit", type=int, default=50, help="how many (default: %(default)s, at most 1000)")


def cost(cmd: argparse.ArgumentParser) -> None:
    workflow_id(cmd)
    cmd.add_argument("--json", action="store_true", help="the report as JSON")


def decide(cmd: argparse.ArgumentParser) -> None:
    from ratchet.contracts import OutcomeChoice

    workflow_id(cmd)
    cmd.add_argument("call_id", help="the call (see `ratchet watch` or state.calls.pending_decisions)")
    cmd.add_argument("choice", choices=[c.value for c in OutcomeChoice], help="what happens to the call")
    cmd.add_argument("--result", help="with assume_done: the call's output as the model will see it")
    cmd.add_argument("--reason", default="", help="why (recorded in the run's state)")


def _http_server(cmd: argparse.ArgumentParser, port: int) -> None:
    cmd.add_argument("--port", type=int, default=port, help="default: %(default)s (0: any free port)")
    cmd.add_argument("--host", default="127.0.0.1", help="default: %(default)s")


def serve(cmd: argparse.ArgumentParser) -> None:
    _http_server(cmd, 8765)
    cmd.add_argument("--cors-origin", default="", help="browser origins that may call it, comma-separated")
    _allowed_host(cmd)


def console(cmd: argparse.ArgumentParser) -> None:
    _http_server(cmd, 8780)
    _allowed_host(cmd)


def _allowed_host(cmd: argparse.ArgumentParser) -> None:
    cmd.add_argument(
        "--allowed-host", default="", help="host names it answers for besides the loopback names and --host"
    )


def as_json(cmd: argparse.ArgumentParser) -> None:
    cmd.add_argument("--json", action="store_true", help="as JSON")


def chat(cmd: argparse.ArgumentParser) -> None:
    cmd.add_argument("workflow_id", nargs="?", help="a session to rejoin")
    cmd.add_argument("--agent", help="the profile of a new session (its first line is the objective)")
    cmd.add_argument("--file", help="JSON with the new session's other fields (model, budget, session settings)")
    cmd.add_argument("--id", help="the new session's workflow id (default: AGENT-<random>)")


def deploy(cmd: argparse.ArgumentParser) -> None:
    sub = cmd.add_subparsers(dest="deploy_command", required=True, metavar="SUBCOMMAND", help="what to do")
    status = sub.add_parser("status", help="builds, routing, open runs per build, outcomes, the guard")
    as_json(status)
    check = sub.add_parser("check", help="run here, in BUILD's code: can it take over the runs that would move?")
    check.add_argument("build", help="the candidate build (the code installed here)")
    check.add_argument(
        "--corpus",
        nargs="*",
        metavar="PATH",
        help="recorded histories to replay too (default: tests/histories, if there)",
    )
    as_json(check)
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


def shadow(cmd: argparse.ArgumentParser) -> None:
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
    cmd.add_argument("--model-options", metavar="JSON", help="the candidate model's provider options (a JSON object)")
    cmd.add_argument(
        "--bisect",
        action="store_true",
        help="with --model PROVIDER:MODEL: the first step its reply departs from the recorded one",
    )
    cmd.add_argument("--set", action="append", metavar="FIELD=VALUE", help="a profile field (VALUE or @FILE)")
    cmd.add_argument("--from", dest="from_checkpoint", metavar="CP", help="start from this checkpoint of each run")
    cmd.add_argument("--concurrency", type=int, default=4, help="shadows started at once (4)")
    cmd.add_argument("--budget-usd", type=float, help="each shadow's cost limit")
    cmd.add_argument("--no-wait", action="store_true", help="print the batch id and return")


def flag(cmd: argparse.ArgumentParser) -> None:
    workflow_id(cmd)
    cmd.add_argument("reason", help="what was wrong (recorded with the flag)")


DEPLOY_EXAMPLES = {
    "status": "deploy status --json",
    "check": "deploy check 0.4.0-3f2a9c1d7e6b",
    "ramp": "deploy ramp 0.4.0-3f2a9c1d7e6b 10 --guard 'failure_rate<=0.05, cost_per_run<=1.2x' --window 30m",
    "promote": "deploy promote 0.4.0-3f2a9c1d7e6b",
    "rollback": "deploy rollback --rerun",
}
