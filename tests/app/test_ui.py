"""`lero ui` in a real browser (Debian's chromium driven by Playwright).

Every test runs the CLI the way the README gives it: `lero run` / `lero ui` as child
processes in a temporary working directory with the default relative `runs/`, the
offline designer and the process sandbox with tiny budgets. Live updates are awaited
through the DOM (Playwright waits for text), never with sleeps. Screenshots of the main
pages go to the test's tmp dir (LERO_UI_SCREENSHOTS=DIR writes them there instead: that
is how docs/screenshots/ was made).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.support.openai_server import OpenAIServer, Reply
from tests.support.ui_server import UIServer

playwright_api = pytest.importorskip("playwright.sync_api")
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]
FAST = """\
eval_episodes = 8
max_parallel = 2
[hparams]
n_envs = 32
rollout_len = 25
epochs = 1
"""
RUN_FLAGS = ["--config", "fast.toml", "--steps", "1600", "--llm", "offline", "--sandbox", "process"]
HOSTILE = "<script>window.__xss = 1; alert('xss')</script><img src=x onerror=\"window.__xss = 2\">"
EDIT_MARK = "# edited in the browser"
WAIT_MS = 300_000  # upper bound for a run to reach a state; the wait ends as soon as it does

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not CHROMIUM.exists(), reason="needs Debian's chromium (apt-get install -y chromium)"),
]


def lero(cwd: Path, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "lero.app.cli.main", *args], cwd=cwd, env={**os.environ, **(env or {})},
                          capture_output=True, text=True, timeout=600)


@pytest.fixture(scope="module")
def browser() -> Iterator:
    with playwright_api.sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


@pytest.fixture
def shots(tmp_path: Path) -> Path:
    folder = Path(os.environ.get("LERO_UI_SCREENSHOTS") or tmp_path / "screenshots")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


class Watched:
    """A page that records every dialog, console error and uncaught exception."""

    def __init__(self, browser) -> None:
        self.context = browser.new_context(viewport={"width": 1280, "height": 900})
        self.page = self.context.new_page()
        self.dialogs: list[str] = []
        self.errors: list[str] = []
        self.page.on("dialog", lambda d: (self.dialogs.append(d.message), d.dismiss()))
        self.page.on("console", lambda m: self.errors.append(m.text) if m.type == "error" else None)
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))

    def close(self) -> None:
        self.context.close()


@contextmanager
def browsing(cwd: Path, browser, *args: str, env: dict | None = None) -> Iterator[tuple[UIServer, Watched]]:
    """`lero ui ARGS` in CWD and a watched page that has opened its printed URL; both closed after."""
    server = UIServer(cwd, *args, env=env)
    watched = Watched(browser)
    try:
        watched.page.goto(server.url)
        yield server, watched
    finally:
        watched.close()
        server.close()


def start_waiting_run(cwd: Path, run_id: str, *flags: str) -> Path:
    """`lero run --approve candidates` with no terminal: it stops at the first approval (exit 3)."""
    (cwd / "fast.toml").write_text(FAST)
    done = lero(cwd, "run", *RUN_FLAGS, "--approve", "candidates", "--run-id", run_id, *flags)
    assert done.returncode == 3, done.stdout + done.stderr
    assert f"lero resume {run_id} --answer FILE" in done.stdout  # the default runs/ goes unsaid
    return cwd / "runs" / run_id


def events(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines() if line.strip()]


def wait_for_status(page, status: str) -> None:
    page.wait_for_function(
        "status => document.getElementById('status') && document.getElementById('status').textContent === status",
        arg=status, timeout=WAIT_MS,
    )


def wait_for_completed_page(page) -> None:
    """The page the server renders once the run completed (its status, worker and report link
    are the server's): the page the run's last state showed "completed" on reloads into it, and
    numbers read before that reload are the old page's."""
    page.wait_for_selector("#run[data-status='completed'][data-working='no'] #report-link", timeout=WAIT_MS)


def wait_for_question(page, generation: int) -> None:
    page.wait_for_selector(f"#pending:has-text('Generation {generation}.')", timeout=WAIT_MS)


def test_approval_flow_edit_in_browser_then_run_finishes(tmp_path, browser, shots):
    """Test 1: a CLI run waiting at `--approve candidates` is answered in the browser."""
    run_dir = start_waiting_run(tmp_path, "ui-flow", "--generations", "2", "--population", "2")
    with browsing(tmp_path, browser) as (server, watched):
        page = watched.page
        assert page.url == f"{server.base}/"  # the token went into a cookie, out of the URL
        row = page.locator("#runs tr", has_text="ui-flow")
        assert "waiting for your answer (candidates)" in row.inner_text()  # app.reports.run_status, as `lero runs`
        assert row.get_attribute("class") == "needs-answer" and "0 / 2" in row.inner_text()
        page.screenshot(path=shots / "runs.png", full_page=True)

        page.click("text=ui-flow")
        wait_for_question(page, 0)
        assert page.locator("#status").inner_text() == "waiting for your answer"
        assert page.locator("#generation").inner_text() == "0"  # generations done, as `lero runs` says
        assert page.locator(".candidate-decision").count() == 2
        page.screenshot(path=shots / "approval.png", full_page=True)
        assert "(1 of 2)" in page.locator("#decide-0-0 h3").inner_text()
        assert not page.locator("textarea[name='code:0-0']").is_visible()  # the module on request only
        page.click("#decide-0-0 summary")
        editor = page.locator("textarea[name='code:0-0']")
        editor.fill(f"{EDIT_MARK}\n{editor.input_value()}")
        page.click("#submit-decisions")

        wait_for_question(page, 1)  # the run went on, trained, and asks about generation 1
        assert int(page.locator("#env-steps").inner_text()) > 0  # the headline counted the training
        answered = [e for e in events(run_dir) if e["event"] == "interrupt_answered"]
        assert answered[0]["answer"]["decisions"]["0-0"]["action"] == "edit"
        assert answered[0]["answer"]["decisions"]["0-1"]["action"] == "approve"
        header, edited = (run_dir / "candidates/0-0/candidate.py").read_text().split("\n", 1)
        assert header.startswith("# lero: candidate 0-0") and edited.startswith(EDIT_MARK)  # lineage line first
        refining = [c for c in page.locator(".candidate-decision").all() if "exploit of" in c.inner_text()]
        assert refining and all(c.locator("pre.diff .add, pre.diff .del").count() > 0 for c in refining)
        page.screenshot(path=shots / "approval-diff.png", full_page=True)
        page.click("#submit-decisions")

        wait_for_status(page, "completed")
        wait_for_completed_page(page)
        assert page.locator("#generation").inner_text() == "2"
        report_steps = json.loads((run_dir / "report.json").read_text())["env_steps"]
        assert int(page.locator("#env-steps").inner_text()) == report_steps
        page.screenshot(path=shots / "run.png", full_page=True)
        assert page.locator("#live-jobs tbody tr").count() >= 5  # baseline + 2 x 2 candidates
        assert page.locator("#live-candidates tbody tr").count() == 4
        assert page.locator("#live-candidates tbody tr", has_text="trained").count() == 4
        page.click("#report-link")
        report = page.locator("#report")
        assert "Best candidate vs baseline" in report.inner_text()
        assert page.locator("#report img").count() >= 1
        assert page.evaluate("Array.from(document.images).every(i => i.complete && i.naturalWidth > 0)")
        page.screenshot(path=shots / "report.png")

        page.goto(f"{server.base}/runs/ui-flow/candidates/0-0")
        assert EDIT_MARK in page.locator("#code").inner_text()
        seeds = json.loads((run_dir / "spec.json").read_text())["seeds"]
        assert page.locator("#per-seed tr").count() == 1 + seeds  # the header, then one row per seed
        assert page.locator(".legend").count() >= 1
        page.screenshot(path=shots / "candidate.png")
        page.goto(f"{server.base}/runs/ui-flow/candidates/1-0")
        assert page.locator("#diff .add, #diff .del").count() > 0  # bred from a generation-0 elite
        refined = next(e["parents"][0] for e in events(run_dir) if e["event"] == "candidate"
                       and e["candidate_id"] == "1-0" and e.get("parents"))
        assert page.locator("h2", has_text=f"Diff against {refined} (the elite it refines)").count() == 1
        assert watched.dialogs == [] and watched.errors == []
    state = json.loads((run_dir / "state.json").read_text())
    assert state["status"] == "completed"
    result = json.loads((run_dir / "candidates/0-0/result.json").read_text())
    assert result["code"].split("\n", 1)[1].startswith(EDIT_MARK) and result["status"] == "ok"
    boards = sorted(p.relative_to(run_dir / "tensorboard").as_posix() for p in (run_dir / "tensorboard").glob("*/seed-0"))
    assert boards == ["0-0/seed-0", "0-1/seed-0", "1-0/seed-0", "1-1/seed-0", "baseline/seed-0"]
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    board = EventAccumulator(str(run_dir / "tensorboard/0-0/seed-0"))
    board.Reload()
    components = {f"hrf/{name}" for name in result["curves"] if name not in
                  ("steps", "return", "coverage", "occupied", "collisions", "train_reward")}
    assert components and components | {"task/return", "eval/return"} <= set(board.Tags()["scalars"])


def test_hostile_text_runs_nothing_and_a_refused_edit_comes_back_with_its_reason(tmp_path, browser, shots):
    """Test 2: `<script>` in a candidate comment and in a model reply is shown, never run.
    Then, on the same waiting run (one run trained, not two): the edit a researcher typed with a
    syntax error is not trained, says why where it was made, and comes back as they left it;
    fixed, it trains, and report.md lists both."""
    run_dir = start_waiting_run(tmp_path, "ui-xss", "--generations", "1", "--population", "1")
    with OpenAIServer() as llm:
        # the schema probe and the spec filled from the words (nothing), then the hostile reply
        llm.push('{"answer": "yes"}', "{}", Reply(content=f"Here is my plan {HOSTILE}"))
        with browsing(tmp_path, browser, "--llm", "openai:test-model", "--base-url", llm.base_url,
                      env={"OPENAI_API_KEY": "x"}) as (server, watched):
            page = watched.page
            page.goto(f"{server.base}/runs/ui-xss")
            wait_for_question(page, 0)
            page.check("input[name='action:0-0'][value='comment']")
            page.fill("textarea[name='comment:0-0']", HOSTILE)
            page.click("#submit-decisions")
            # the designer revises from the comment; the revision comes back for approval
            page.wait_for_selector("#pending:has-text('offline:revise')", timeout=WAIT_MS)

            page.click("#decide-0-0 summary")
            editor = page.locator("textarea[name='code:0-0']")
            broken = editor.input_value().replace("def hybrid_reward(ctx", "def hybrid_reward(ctx:", 1)
            editor.fill(broken)
            page.check("input[name='action:0-0'][value='edit']")
            page.click("#submit-decisions")
            page.wait_for_selector("#refused-0-0", timeout=WAIT_MS)  # asked again, with the reason
            reason = page.locator("#refused-0-0").inner_text()
            assert "Your edit was not trained" in reason and "syntax" in reason.lower()
            kept = page.locator("textarea[name='code:0-0']")
            assert kept.is_visible() and "def hybrid_reward(ctx:" in kept.input_value()  # the person's text
            assert page.locator("input[name='action:0-0'][value='edit']").is_checked()
            page.screenshot(path=shots / "approval-refused.png", full_page=True)
            kept.fill(kept.input_value().replace("def hybrid_reward(ctx:", "def hybrid_reward(ctx", 1) + f"{EDIT_MARK}\n")
            page.click("#submit-decisions")
            wait_for_status(page, "completed")
            wait_for_completed_page(page)
            page.goto(f"{server.base}/runs/ui-xss/candidates/0-0")
            assert HOSTILE in page.locator("#review").inner_text()  # shown as text

            page.goto(f"{server.base}/chat")
            page.fill("#chat-line", "plan an experiment please")
            page.click("#chat-send")
            transcript = page.locator("#transcript")
            assert HOSTILE in transcript.inner_text()
            page.screenshot(path=shots / "chat-hostile.png", full_page=True)
            assert page.evaluate("window.__xss === undefined")
            assert watched.dialogs == [] and watched.errors == []
    comments = [e for e in events(run_dir) if e["event"] == "interrupt_answered"]
    assert comments[0]["answer"]["decisions"]["0-0"] == {"action": "comment", "comment": HOSTILE}
    assert llm.requests[-1]["messages"][-1]["content"] == "plan an experiment please"
    assert EDIT_MARK in (run_dir / "candidates/0-0/candidate.py").read_text()
    md = (run_dir / "report.md").read_text()
    assert "| 0 | `0-0` | edit refused by the gate (not trained) |" in md and md.count("| 0 | `0-0` | edit |") == 2


def test_token_and_csrf_are_required(tmp_path, tiny_runs):
    """Test 3: no token -> 401; a POST without (or with a wrong) CSRF token -> 403 (on a
    copy of the session's tiny run: what is refused is the request, whatever the run's state)."""
    import httpx

    shutil.copytree(tiny_runs / "runs" / "alpha", tmp_path / "runs" / "alpha", symlinks=True)
    server = UIServer(tmp_path)
    try:
        for path in ("/", "/runs/alpha", "/runs/alpha/stream", "/chat", "/static/run.js"):
            assert httpx.get(server.base + path).status_code == 401
        assert httpx.get(f"{server.base}/?token=wrong").status_code == 401
        assert httpx.post(f"{server.base}/runs", data={"generations": "1"}).status_code == 401
        with httpx.Client(base_url=server.base, follow_redirects=True) as client:
            first = client.get(f"/?token={server.token}")
            assert first.status_code == 200 and first.url.path == "/"  # redirected, token dropped
            assert "script-src 'self'" in first.headers["content-security-policy"]
            cookie = first.history[0].headers["set-cookie"].lower()
            assert "httponly" in cookie and "samesite=strict" in cookie
            csrf = re.search(r'name="csrf" value="([0-9a-f]+)"', first.text).group(1)
            posts = {"/runs": {"generations": "1"}, "/runs/alpha/answer": {"ts": "0"},
                     "/runs/alpha/resume": {}, "/chat": {"line": "hi"}, "/chat/new": {}}
            for path, fields in posts.items():
                assert client.post(path, data=fields).status_code == 403, path
                assert client.post(path, data={**fields, "csrf": "0" * 64}).status_code == 403, path
            bad = client.post("/runs", data={"csrf": csrf, "generations": "0", "sandbox": "process"})
            assert bad.status_code == 400
            assert "lero: error: argument --generations: must be &gt; 0, got 0" in bad.text
            cli = lero(tmp_path, "run", "--generations", "0")
            assert cli.stderr.strip() == "lero: error: argument --generations: must be > 0, got 0"
            bad = client.post("/runs", data={"csrf": csrf, "env_args": "N=0", "sandbox": "process"})
            assert bad.status_code == 400 and "lero: error: " in bad.text
            assert not (tmp_path / "runs").joinpath("x").exists()
    finally:
        server.close()


def test_start_form_and_every_approval_kind_in_the_browser(tmp_path, browser, shots):
    """The start form (CLI validation), then spec, candidates and generation approvals."""
    with browsing(tmp_path, browser, "--llm", "offline") as (server, watched):
        page = watched.page
        page.fill("input[name='generations']", "0")
        page.click("#start-form button[type='submit']")
        assert page.locator("#start-error").inner_text() == "lero: error: argument --generations: must be > 0, got 0"
        assert page.input_value("input[name='generations']") == "0"  # the form keeps what was typed
        assert [e for e in watched.errors if "400" not in e] == []  # the browser logs the 400 page itself
        watched.errors.clear()
        for name, value in {"generations": "2", "population": "1", "steps": "1600", "run_id": "ui-form",
                            "env_args": "N=2 num_landmark_neighbors=2"}.items():
            page.fill(f"input[name='{name}']", value)
        page.select_option("select[name='sandbox']", "process")
        page.select_option("select[name='approve']", "all")
        page.click("#start-form button[type='submit']")
        page.wait_for_selector("#pending:has-text('Start this experiment?')", timeout=WAIT_MS)
        assert '"N": 2' in page.locator("#pending pre").first.inner_text()
        page.click("#approve-spec")
        wait_for_question(page, 0)
        page.click("#submit-decisions")
        page.wait_for_selector("#pending:has-text('Run generation 1?')", timeout=WAIT_MS)
        page.screenshot(path=shots / "generation-approval.png", full_page=True)
        page.fill("textarea[name='feedback']", "favour coverage over collisions")
        page.click("#continue-run")
        wait_for_question(page, 1)
        page.click("#submit-decisions")
        wait_for_status(page, "completed")
        wait_for_completed_page(page)
        page.goto(f"{server.base}/")
        assert "completed" in page.locator("#runs tr", has_text="ui-form").inner_text()
        assert watched.dialogs == [] and watched.errors == []
    run_dir = tmp_path / "runs" / "ui-form"
    answers = [e["answer"] for e in events(run_dir) if e["event"] == "interrupt_answered"]
    assert [a.get("action") for a in answers] == ["approve", None, "continue", None]
    assert answers[2]["feedback"] == "favour coverage over collisions"
    assert json.loads((run_dir / "spec.json").read_text())["env_kwargs"] == {
        "N": 2, "num_agent_neighbors": 1, "num_landmark_neighbors": 2}


def test_chat_page_runs_the_offline_guided_dialogue(tmp_path, browser, shots):
    """`lero chat`'s offline dialogue as a page; the run it starts asks its spec approval on the run page."""
    answers = [("environment", ""), ("env argument N", "2"), ("env argument num_agent_neighbors", ""),
               ("env argument num_landmark_neighbors", ""), ("other env arguments", ""), ("algorithm", ""),
               ("generations", "1"), ("candidates per generation", "1"), ("env steps per candidate", "1600"),
               ("seeds per candidate", ""), ("ask for approval of", "spec"), ("Start this experiment?", "y")]
    with browsing(tmp_path, browser, "--llm", "offline") as (server, watched):
        page = watched.page
        page.goto(f"{server.base}/chat")
        for prompt, text in answers:
            last = page.locator("#transcript").inner_text().rstrip().splitlines()[-1]
            assert prompt in last, (prompt, last)
            page.fill("#chat-line", text)
            page.click("#chat-send")
        transcript = page.locator("#transcript").inner_text()
        assert "training jobs" in transcript  # the cost estimate, measured here
        page.screenshot(path=shots / "chat.png", full_page=True)
        page.click("#chat-run")
        page.wait_for_selector("#pending:has-text('Start this experiment?')", timeout=WAIT_MS)
        page.click("#reject-spec")
        wait_for_status(page, "completed")
        assert watched.dialogs == [] and watched.errors == []
    (run_dir,) = (tmp_path / "runs").iterdir()
    state = json.loads((run_dir / "state.json").read_text())
    assert state["stop_reason"] == "rejected_by_human"
    assert json.loads((run_dir / "spec.json").read_text())["env_kwargs"]["N"] == 2


def test_studies_are_listed_and_shown_with_their_tables_and_figures(tmp_path, browser, shots, tiny_runs):
    """A real `lero study` of a real run (a copy of the session's tiny run, `lero run`'s own
    output): the Studies page lists it, its page shows study.md's table and every figure
    (loaded, not broken), and the run page links it."""
    shutil.copytree(tiny_runs / "runs" / "alpha", tmp_path / "runs" / "alpha", symlinks=True)
    done = lero(tmp_path, "study", "alpha", "--variants", "native,hrf+oef", "--seeds", "2", "--steps", "400",
                "--eval-episodes", "8", "--sandbox", "process")
    assert done.returncode == 0, done.stdout + done.stderr
    (study_id,) = [p.name for p in (tmp_path / "runs/alpha/studies").iterdir()]
    with browsing(tmp_path, browser) as (server, watched):
        page = watched.page
        page.click("header >> text=Studies")
        row = page.locator("#studies tr", has_text=study_id)
        assert "completed" in row.inner_text() and "native, hrf+oef" in row.inner_text()
        page.screenshot(path=shots / "studies.png", full_page=True)
        row.locator(f"text={study_id}").click()
        page.wait_for_selector("#study table")
        assert "hrf+oef" in page.locator("#study table").first.inner_text()
        figures = page.locator("#study img")
        assert figures.count() >= 2
        page.wait_for_function("() => [...document.querySelectorAll('#study img')].every(i => i.complete)")
        assert page.evaluate("[...document.querySelectorAll('#study img')].every(i => i.naturalWidth > 0)")
        page.screenshot(path=shots / "study.png", full_page=True)
        page.goto(f"{server.base}/runs/alpha")
        page.click(f"#run-studies >> text={study_id}")
        page.wait_for_selector("#study table")
        assert page.goto(f"{server.base}/runs/alpha/studies/..%2Fcandidates").status == 404
        assert watched.dialogs == [] and [e for e in watched.errors if "404" not in e] == []
