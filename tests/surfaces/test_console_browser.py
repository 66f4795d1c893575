"""`ratchet console` in a real browser: headless Chromium (Debian's, /usr/bin/chromium) driven by
Playwright for Python, against the console served by uvicorn, the dev server and a real worker
with the scripted model. `make test-browser` runs these (the `browser` extra); `make test` skips
them. RATCHET_CONSOLE_SCREENSHOTS=docs/console keeps the pages' screenshots for the README."""

from __future__ import annotations

import asyncio
import os
import uuid
from datetime import timedelta
from pathlib import Path

import pytest
import uvicorn

from devtools.devserver import free_port
from ratchet.client import RatchetClient
from ratchet.console.app import build_app
from ratchet.contracts import Phase
from ratchet.ops.http_guard import HttpGuard
from ratchet.worker.main import build_worker
from tests.runs import call, scripted, until, wait_for

playwright = pytest.importorskip("playwright.async_api", reason="the `browser` extra: make test-browser")
pytestmark = pytest.mark.browser
playwright.expect.set_options(timeout=30_000)

CHROMIUM = os.environ.get("RATCHET_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]
SCREENSHOTS = os.environ.get("RATCHET_CONSOLE_SCREENSHOTS")


@pytest.fixture(scope="session")
async def browser():
    if not Path(CHROMIUM).exists():
        pytest.fail(f"no Chromium at {CHROMIUM}: `apt-get install chromium` (make test-browser does, as root)")
    async with playwright.async_playwright() as pw:
        chromium = await pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        yield chromium
        await chromium.close()


@pytest.fixture
async def page(browser):
    context = await browser.new_context(viewport={"width": 1200, "height": 900})
    tab = await context.new_page()
    tab.set_default_timeout(30_000)
    tab.set_default_navigation_timeout(60_000)
    yield tab
    await context.close()


@pytest.fixture
async def console(client, settings):
    """The console app on a free port of 127.0.0.1, in this process: its URL."""
    port = free_port()
    app = build_app(RatchetClient(client, settings), HttpGuard.for_server("127.0.0.1", same_origin=True))
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", timeout_graceful_shutdown=1)
    )
    serving = asyncio.create_task(server.serve())
    await until(lambda: server.started, "the console listening")
    yield f"http://127.0.0.1:{port}"
    server.should_exit = True
    await serving


async def shot(tab, name: str) -> None:
    if SCREENSHOTS:
        Path(SCREENSHOTS).mkdir(parents=True, exist_ok=True)
        await tab.screenshot(path=str(Path(SCREENSHOTS) / f"{name}.png"), full_page=True)


def ops_run(title: str) -> dict:
    script = [{"tool_calls": [call("create_ticket", title=title)]}, {"content": f"opened {title}"}]
    return {"agent": "ops", "objective": f"open {title}", "model": {"provider": "scripted", "options": {"script": script}}}


async def shown_after_reloads(tab, text: str, what: str) -> None:
    """Reload until the page shows `text` (visibility follows a run's search attributes a moment late)."""

    async def there():
        if text in await tab.content():
            return True
        await tab.reload()
        return False

    await until(there, what)


async def test_a_run_needing_approval_is_in_the_inbox_and_approving_it_lets_it_finish(
    client, settings, worker, console, page
):
    rc = RatchetClient(client, settings)
    run = await rc.start(ops_run("prod deploy v2"), f"ops-browser-{uuid.uuid4().hex[:6]}")
    state = await wait_for(run, lambda s: s.calls.pending_approvals)
    call_id = state.calls.pending_approvals[0].call_id
    await page.goto(f"{console}/inbox")
    await shown_after_reloads(page, run.workflow_id, "the run in the inbox")
    card = page.locator("section.waiting-call", has_text=run.workflow_id)
    await playwright.expect(card).to_contain_text("prod deploy v2")
    await playwright.expect(card).to_contain_text("create_ticket")
    assert (await page.title()).startswith("Inbox (")
    await shot(page, "inbox")
    await card.get_by_role("button", name="Approve").click()
    await playwright.expect(page.locator(".flash.ok")).to_contain_text(f"Approved {call_id}")
    result = await run.result()
    assert result.phase == Phase.DONE and result.answer == "opened prod deploy v2"
    await page.goto(f"{console}/runs/{run.workflow_id}")
    await playwright.expect(page.locator("#state-phase")).to_have_text("DONE")
    await page.goto(f"{console}/?agent=ops")
    await shown_after_reloads(page, run.workflow_id, "the run on the runs page")
    await shot(page, "runs")


def write(path: str, content: str) -> dict:
    return call("write_file", path=path, content=content)


async def test_a_rollback_from_the_browser_undoes_the_files(client, settings, worker, console, page):
    ws = settings.workspace_root / "console-rb"
    ws.mkdir(parents=True)
    (ws / "a.txt").write_text("original\n")
    script = [
        {"tool_calls": [write("a.txt", "v1\n")]},
        {"tool_calls": [write("a.txt", "v2\n"), write("b.txt", "new\n")]},
        {"tool_calls": [call("probe_wait", seconds=60)]},
        {"content": "finished"},
    ]
    run = await RatchetClient(client, settings).start(scripted("saga", script, workspace="console-rb"))
    await wait_for(run, lambda s: len(s.effects.checkpoints.items) == 2)
    await page.goto(f"{console}/runs/{run.workflow_id}")
    checkpoint = page.locator("section.checkpoint", has_text="cp-2")
    await playwright.expect(checkpoint.locator("pre.diff")).to_contain_text("+v2")
    await shot(page, "run")
    await page.locator("section.checkpoint", has_text="cp-1").get_by_role("link", name="Plan a rollback").click()
    plan = page.locator("table")
    await playwright.expect(plan).to_contain_text("write_file")
    assert (ws / "a.txt").read_text() == "v2\n"  # the plan changed nothing
    await page.select_option("select[name=then]", "stop")
    await page.get_by_role("button", name="Confirm").click()
    await playwright.expect(page.locator(".flash")).to_contain_text("Rolled back to cp-1: undone 2")
    assert (ws / "a.txt").read_text() == "v1\n" and not (ws / "b.txt").exists()
    assert (await run.result()).phase == Phase.ROLLED_BACK


@pytest.fixture
async def slow_worker(client, settings, monkeypatch):
    """A worker whose scripted model writes 40 characters a second (its replies stream for seconds).
    With a workflow cache: without one (the tests' default) every batch's workflow task evicts the
    run, and a query that sdk-core buffered behind that task can be dropped with it ("leftover
    buffered tasks when evicting run"), so the page's state query waited 30 s for its timeout."""
    monkeypatch.setenv("RATCHET_SCRIPTED_CHARS_PER_S", "40")
    async with build_worker(
        client, settings, graceful_shutdown_timeout=timedelta(0), max_cached_workflows=10
    ) as running:
        yield running


async def test_live_tokens_appear_while_a_streamed_reply_is_written(client, settings, slow_worker, console, page):
    answer = "Here is the answer, written slowly, word after word, so that a person can watch it arrive. " * 2
    run = await RatchetClient(client, settings).start(
        scripted("probe", [{"tool_calls": [call("probe_echo", text="x")]}, {"content": answer}])
    )
    await page.goto(f"{console}/runs/{run.workflow_id}")
    tokens = page.locator("#live .tokens")
    await playwright.expect(tokens).to_contain_text("Here is the answer")
    assert await run.running() and answer not in await tokens.text_content()  # still being written
    await playwright.expect(page.locator("#state-phase")).to_have_text("DONE")  # the page reloads at the end
    await playwright.expect(page.locator("ol.transcript")).to_contain_text("word after word")


async def test_a_session_answers_a_message_typed_in_the_browser(client, settings, worker, console, page):
    script = [{"content": "answer one"}, {"content": "the second answer, from the browser's question"}]
    run = await RatchetClient(client, settings).start(scripted("chatter", script, objective="first question"))
    await wait_for(run, lambda s: s.phase == Phase.AWAITING_MESSAGE)
    await page.goto(f"{console}/runs/{run.workflow_id}")
    await page.fill("textarea[name=text]", "a question typed in the browser")
    await page.get_by_role("button", name="Ask").click()
    await playwright.expect(page.locator(".flash.ok")).to_contain_text("Asked")
    await playwright.expect(page.locator("ol.transcript")).to_contain_text("the second answer, from the browser")
    state = await run.state()
    assert [t.question for t in state.session.turns.items] == ["first question", "a question typed in the browser"]
    await run.close()


EVIL = """<!doctype html><html><body>
<form id=plain method=post enctype=text/plain action="{console}/runs/{wid}/approve">
<input name='call_id={call_id}&x' value='1'><button>plain</button></form>
<form id=urlenc method=post action="{console}/runs/{wid}/approve">
<input name=call_id value="{call_id}"><input name=csrf value="forged"><button>urlenc</button></form>
</body></html>"""


async def test_a_forged_request_from_another_origin_is_refused(client, settings, worker, console, page):
    run = await RatchetClient(client, settings).start(ops_run("prod forged"))
    state = await wait_for(run, lambda s: s.calls.pending_approvals)
    call_id = state.calls.pending_approvals[0].call_id
    await page.goto(f"{console}/runs/{run.workflow_id}")  # the browser has the console's cookie
    evil = EVIL.format(console=console, wid=run.workflow_id, call_id=call_id)
    await page.route("http://evil.test/**", lambda route: route.fulfill(body=evil, content_type="text/html"))
    for form in ("plain", "urlenc"):
        await page.goto("http://evil.test/page")
        async with page.expect_response(lambda r: r.url.endswith("/approve")) as answered:
            await page.locator(f"#{form} button").click()
        response = await answered.value
        assert response.status == 403, (form, response.status)
    # the console's own form without its token (the field removed): refused too
    await page.goto(f"{console}/runs/{run.workflow_id}")
    await page.evaluate("document.querySelectorAll('input[name=csrf]').forEach(e => e.remove())")
    async with page.expect_response(lambda r: r.url.endswith("/approve")) as answered:
        await page.get_by_role("button", name="Approve").click()
    assert (await answered.value).status == 403
    await playwright.expect(page.locator(".flash.error")).to_contain_text("not sent from a page of this console")
    assert [p.call_id for p in (await run.state()).calls.pending_approvals] == [call_id]
    await run.reject(call_id, "test over")

