"""Every `ratchet` verb: its name, one-line help, example, the arguments it takes, and the function
that runs it (`module:function`, imported only when the verb runs). This module imports nothing but
its own package, so `ratchet --help` and parsing a verb's command line stay cheap. The arguments
each verb takes: ratchet/cli/arguments.py."""

from __future__ import annotations

from ratchet.cli import arguments, schedule, users
from ratchet.cli.verbs import Verb, workflow_id


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
        arguments.codec_server,
    ),
    Verb(
        "replay",
        "replay histories against today's workflow code (the deploy gate)",
        "ratchet replay tests/histories\n"
        "         ratchet replay --server --query 'ExecutionStatus=\"Running\"' --min 0",
        "ratchet.replay.gate:main",
        arguments.replay,
    ),
    Verb(
        "health",
        "check that Temporal, the ledger and the artifact store answer (exit 0/1)",
        "ratchet health --timeout 3",
        "ratchet.cli.health:main",
        arguments.health,
        "Connect to what a worker needs, with the worker's settings, one line per check; "
        "exit 0 if every check passes, else 1. The compose worker's healthcheck.",
    ),
    Verb(
        "migrate-stores",
        "copy the ledger and artifacts into other stores (Postgres, S3)",
        "ratchet migrate-stores --to-ledger postgresql://... --to-artifacts s3://bucket/ratchet --dry-run",
        "ratchet.stores.migrate:main",
        arguments.migrate_stores,
    ),
    Verb(
        "mcp",
        "serve run control over MCP (stdio, or streamable HTTP with --port) to an assistant or IDE",
        "ratchet mcp\n         ratchet mcp --port 8765",
        "ratchet.cli.mcp_server:main",
        arguments.mcp,
    ),
    Verb(
        "approve",
        "approve tool calls waiting for a person (AWAITING_APPROVAL), each on its own; --grant: later ones too",
        "ratchet approve ops-7 call_3_0 call_3_2 --grant 1h",
        "ratchet.cli.runs:approve",
        arguments.approve,
    ),
    Verb(
        "reject",
        "reject a tool call waiting for a person; the reason goes to the model",
        "ratchet reject ops-7 call_3_1 --reason 'not during business hours'",
        "ratchet.cli.runs:reject",
        arguments.reject,
    ),
    Verb(
        "audit",
        "every decision of a run with its proof, as JSON lines; --verify checks each signature and digest",
        "ratchet audit ops-7 --verify",
        "ratchet.cli.audit:audit",
        arguments.audit,
    ),
    Verb(
        "send",
        "send the agent a message (it joins the conversation at the next step boundary)",
        "ratchet send ops-7 'also update the runbook'",
        "ratchet.cli.runs:send",
        arguments.message,
    ),
    Verb(
        "ask",
        "ask a session a question and print its answer (the turn's final answer)",
        "ratchet ask chat-7 'and what about the tests?'",
        "ratchet.cli.runs:ask",
        arguments.ask,
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
        arguments.watch,
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
        arguments.rollback,  # and its description
    ),
    Verb(
        "fork",
        "start a new run from another run's checkpoint (its state and workspace files)",
        "ratchet fork fix-42 cp-1 --objective 'try another approach'",
        "ratchet.cli.runs:fork",
        arguments.fork,
    ),
    Verb(
        "start",
        "start a run (and follow it with --follow)",
        "ratchet start coder 'Create hello.txt' --script examples/hello-script.json --follow   # no API key\n"
        "         ratchet start coder 'make the tests pass' --provider openai --model gpt-4o\n"
        "         ratchet start --file run.json --id ops-7",
        "ratchet.cli.basics:start",
        arguments.start,
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
        arguments.list_runs,
        "List agent runs from Temporal's visibility store, with their agent and phase.",
    ),
    Verb(
        "result",
        "wait for a run's result and print it",
        "ratchet result ops-7",
        "ratchet.cli.basics:result",
        arguments.result,
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
        arguments.transcript,
        "Print messages OFFSET..OFFSET+LIMIT of a run's conversation, one JSON object per line; "
        "messages from before a continue-as-new come from the transcript artifact.",
    ),
    Verb(
        "inbox",
        "list runs handed to a person's inbox (AWAITING_PERSON), with their handoff records",
        "ratchet inbox --person alice",
        "ratchet.cli.inbox:inbox",
        arguments.inbox,
        "Runs whose agent handed the task to `person:NAME` or `role:NAME` (a profile's handoffs): "
        "objective, summary, evidence, decisions, constraints and open questions. Answer with `ratchet respond`.",
    ),
    Verb(
        "respond",
        "answer a run handed to you: finish it, reply to the agent, or hand it back to a profile",
        "ratchet respond ops-7 --hand-back fixer --notes 'use the v2 API' --by alice",
        "ratchet.cli.inbox:respond",
        arguments.respond,
        "--finish ANSWER ends the run with ANSWER as its result; --reply TEXT sends the agent a message "
        "and it goes on; --hand-back PROFILE --notes TEXT hands the task to that profile with a handoff record.",
    ),
    Verb(
        "cost",
        "print what a run was billed, every model attempt, by step and cause",
        "ratchet cost ops-7 --json",
        "ratchet.cli.costs:cost",
        arguments.cost,
        "Print what a run was billed by step and cause (answer, retry, fallback, compaction, sub-agent): "
        "every model attempt, failed ones included, from the billing ledger in the ledger's database.",
    ),
    Verb(
        "decide",
        "decide on a tool call whose outcome is unknown (AWAITING_DECISION)",
        "ratchet decide ops-7 call_3_0 assume_done --result 'payment P-81 sent'",
        "ratchet.cli.basics:decide",
        arguments.decide,
        "A side-effecting call was interrupted and its tool can neither reconcile nor repeat "
        "safely. Check the target system, then: retry (it did not happen), assume_done (it did; --result "
        "is what the model sees), skip (go on; the model is told) or fail (the failure policy applies).",
    ),
    Verb(
        "serve",
        "serve runs over HTTP: Server-Sent Events per run, and AG-UI for front ends",
        "ratchet serve --port 8765\n         curl -N localhost:8765/runs/ops-7/events",
        "ratchet.cli.serve:serve",
        arguments.serve,
        "GET /runs/ID/events streams a run's events as Server-Sent Events (resume with Last-Event-ID); "
        "POST /agui takes an AG-UI RunAgentInput (starts the thread's run or sends it a message) and answers "
        "with the run as AG-UI events. Loopback by default; any other address needs RATCHET_SERVE_TOKEN.",
    ),
    Verb(
        "console",
        "a web console for the people around an agent: runs, approvals, checkpoints, rollback",
        "ratchet console --port 8780   # then open http://127.0.0.1:8780/",
        "ratchet.cli.console:console",
        arguments.console,
        "Serves server-rendered pages over ratchet.client: runs (filtered, paged), a run (state, "
        "conversation, live tokens, effects, checkpoints with evidence and patch, rollback plan then confirm), "
        "an inbox of pending approvals and decisions, a start form. Every action is a POST with a CSRF token. "
        f"Loopback by default; any other address needs {CONSOLE_TOKEN_SETTING} (a sign-in page asks for it).",
    ),
    Verb(
        "users",
        "people's API tokens for the console, `ratchet serve` and programs: add, list, remove",
        "ratchet users add alice --role approver   # prints alice's token once\n"
        "         ratchet users list\n"
        "         ratchet users remove alice",
        "ratchet.cli.users:users",
        users.arguments,
        "A person's token (`Authorization: Bearer <token>`, or the console's sign-in form) names them and "
        "their roles on every request; it is kept hashed (SHA-256) in the ledger's database (RATCHET_LEDGER_URL) "
        "and shown only once. Removing a person refuses their token from the next request on.",
    ),
    Verb(
        "profiles",
        "list the agent profiles a worker here offers (tools, approvals, verifier, budget)",
        "ratchet profiles --json",
        "ratchet.cli.offer:profiles",
        arguments.as_json,
    ),
    Verb(
        "tools",
        "list the tools a worker here offers (effect class, undo, reconcile) and its MCP servers",
        "RATCHET_PLUGINS=mypackage.tools ratchet tools",
        "ratchet.cli.offer:tools",
        arguments.as_json,
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
        arguments.deploy,
        "The builds of the Worker Deployment RATCHET_DEPLOYMENT names (default: the task queue's, ratchet). "
        "One-shot runs finish "
        "on the build they started on; sessions move to the current (or ramping) build at their next turn "
        "boundary. `status` shows each build's open runs and outcomes; `check BUILD` (run where BUILD's code "
        "is installed) replays the runs that would move to it; `ramp`, `promote` and `rollback` route new runs. "
        "The Temporal CLI equivalents: docs/OPERATIONS.md, 'Deploying a new version'.",
    ),
    Verb(
        "schedule",
        "start runs (or a session's messages) by time, on Temporal Schedules",
        "ratchet schedule create triage --cron '0 7 * * 1-5' coder 'triage new issues'\n"
        "         ratchet schedule list\n"
        "         ratchet schedule trigger triage",
        "ratchet.cli.schedule:schedule",
        schedule.arguments,
        "A schedule is a Temporal Schedule (`temporal schedule list` and the Web UI show it): each firing starts "
        "an ordinary run named NAME-<time>, or with --session sends a message to a session. Overlap policy, "
        "catch-up window, jitter, pause and resume, trigger now, backfill, delete.",
    ),
    Verb(
        "shadow",
        "what a candidate profile, model or prompt would have done on recorded runs, side effects quarantined",
        "ratchet shadow --runs 'RatchetAgent=\"coder\"' --model recorded --fail-if 'verifier_worse>0'\n"
        "         ratchet shadow --runs coder-1a2b --set system_prompt=@prompt.txt --from cp-2\n"
        "         ratchet shadow report 3f2a9c1d --json\n"
        "         ratchet shadow clean 3f2a9c1d",
        "ratchet.cli.shadow:shadow",
        arguments.shadow,
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
        arguments.flag,
        "Record that a run (running or closed) ended badly, with the reason: a `RatchetFlag` marker naming the "
        "run's build. A ramp guard (`ratchet deploy ramp --guard '... flagged<=0.05'`) counts flagged runs of "
        "the ramped build; the same flag twice is one.",
    ),
    Verb(
        "chat",
        "talk to a session in the terminal: start one (--agent) or rejoin one (ID)",
        "ratchet chat --agent coder\n         ratchet chat chat-7",
        "ratchet.cli.chat:chat",
        arguments.chat,
        "`ratchet chat`: a session in a terminal. `ratchet chat --agent coder` starts one (its first line "
        "is the objective), `ratchet chat ID` rejoins one. Each line is a turn: the answer is shown as the "
        "model writes it (the run's stream), each tool call as a line, and a call that waits for approval "
        "is asked inline (y/N). `/checkpoints` lists the turns' checkpoints, `/rollback CP` goes back to "
        "one (undoing the later turns' effects), `/close` ends the session, `/quit` leaves it open (to "
        "rejoin later). All of it over `ratchet.client`.",
    ),
)
