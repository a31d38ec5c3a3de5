"""`lero ui` without a browser (fast): the ASGI app over run directories written by RunDir.

Starlette's TestClient speaks HTTP to the real application in-process; the run
directories are written by the engine's own writer (graph.rundir.RunDir).
"""

from __future__ import annotations

import html
import re

import pytest
from starlette.datastructures import FormData
from starlette.testclient import TestClient

from lero.agents import LLMConfig
from lero.app.ui.app import answer_from_form, create_app
from lero.app.ui.auth import cookie_name
from lero.app.ui.views import pending_question
from lero.graph.configuration import RunSpec
from lero.graph.rundir import RunDir
from lero.graph.summary import load_run

TOKEN = "test-token-123"
SCRIPT = "<script>alert('x')</script>"
CODE = f'"""{SCRIPT}"""\nimport torch\n\ndef hybrid_reward(ctx):\n    return ctx.env_reward, {{}}\n\ndef enhance_observation(obs):\n    return obs\n'


def waiting_run(runs_dir) -> RunDir:
    """A run stopped at a candidates approval, as the runner leaves it."""
    rundir = RunDir.create(RunSpec(run_id="r1", runs_dir=str(runs_dir), approve="candidates", sandbox="process"))
    rundir.write_candidate("0-0", CODE, f"# Reviews of candidate 0-0\n\n## Round 1 (human): revise\n\n{SCRIPT}\n")
    payload = {"kind": "candidates", "generation": 0, "question": "Train these?", "answers": [],
               "candidates": [{"candidate_id": "0-0", "code": CODE, "origin": "offline",
                               "review": {"verdict": "accept", "points": [], "text": SCRIPT}}]}
    rundir.append_event("candidate", candidate_id="0-0", generation=0, stage="ready", status="ok", origin=SCRIPT)
    rundir.append_event("interrupt", kind="candidates", payload=payload)
    rundir.update_state(status="interrupted")
    return rundir


@pytest.fixture
def client(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    waiting_run("runs")
    app = create_app("runs", TOKEN, 8765, LLMConfig.from_spec("offline"), cwd=tmp_path)
    with TestClient(app, base_url="http://127.0.0.1:8765") as test_client:
        yield test_client
    app.state.workers.close()


def test_token_once_in_the_url_then_a_strict_httponly_cookie(client):
    assert client.get("/").status_code == 401
    assert client.get("/?token=nope").status_code == 401
    first = client.get(f"/runs/r1?token={TOKEN}&x=1", follow_redirects=False)
    assert first.status_code == 303 and first.headers["location"] == "/runs/r1?x=1"
    cookie = first.headers["set-cookie"]
    assert cookie.startswith(f"{cookie_name(8765)}={TOKEN}") and "HttpOnly" in cookie and "SameSite=strict" in cookie
    assert client.get("/runs/r1").status_code == 200
    assert "script-src 'self'" in client.get("/").headers["content-security-policy"]


def test_pages_escape_llm_written_code_and_text(client):
    client.get(f"/?token={TOKEN}")
    for path in ("/runs/r1", "/runs/r1/candidates/0-0"):
        page = client.get(path)
        assert page.status_code == 200
        assert SCRIPT not in page.text
        assert "&lt;script&gt;alert(" in page.text  # shown as text (quotes in text need no escape)
        assert re.findall(r"<script[^>]*>", page.text) in ([], ['<script src="/static/run.js" defer>'])


def test_candidate_page_lists_its_llm_requests_with_prompt_and_reply_escaped(client, tmp_path):
    rundir = RunDir(tmp_path / "runs" / "r1")
    common = {"model": "smollm2-135m", "n": 1, "attempts": 1, "elapsed_s": 12.5, "shortened": []}
    rundir.write_llm_record({**common, "role": "designer", "candidate_id": None, "status": "ok",
                             "prompt": [{"role": "user", "content": "design"}], "replies": ["other"]})
    rundir.write_llm_record({**common, "role": "critic", "candidate_id": "0-0", "status": "ok", "prompt_tokens": 812,
                             "completion_tokens": 57, "tokens_estimated": True, "finish_reasons": ["length"],
                             "shortened": ["env_description"],
                             "prompt": [{"role": "system", "content": "You are the critic <b>bold</b>"}],
                             "replies": [f"VERDICT: accept {SCRIPT}"]})
    client.get(f"/?token={TOKEN}")
    page = client.get("/runs/r1/candidates/0-0")
    assert page.status_code == 200
    rows = re.findall(r"<tr><td>(\w+)</td><td>(\w+)</td><td class=\"num\">([^<]*)</td><td class=\"num\">([^<]*)</td>"
                      r"\s*<td class=\"num\">([^<]*)</td><td>([^<]*)</td><td>([^<]*)</td><td>([^<]*)</td></tr>", page.text)
    assert rows == [("critic", "ok", "812 (est.)", "57 (est.)", "12.5", "length", "env_description",
                     "llm/00002-critic.json")]  # the designer's request is about no candidate
    assert '<details class="llm-request" id="llm-00002-critic.json">' in page.text
    assert "<pre>You are the critic &lt;b&gt;bold&lt;/b&gt;</pre>" in page.text
    assert '<pre class="reply">VERDICT: accept &lt;script&gt;alert(' in page.text
    assert SCRIPT not in page.text and "<b>bold" not in page.text
    assert re.findall(r"<script[^>]*>", page.text) in ([], ['<script src="/static/run.js" defer>'])


def test_answer_form_checks_csrf_then_staleness_then_the_answer(client):
    home = client.get(f"/?token={TOKEN}")
    csrf = re.search(r'name="csrf" value="([0-9a-f]+)"', home.text).group(1)
    assert client.post("/runs/r1/answer", data={"ts": "0"}).status_code == 403
    stale = client.post("/runs/r1/answer", data={"csrf": csrf, "ts": "0"})
    assert stale.status_code == 409 and "already answered" in stale.text
    ts = re.search(r'name="ts" value="([^"]+)"', client.get("/runs/r1").text).group(1)
    bad = client.post("/runs/r1/answer", data={"csrf": csrf, "ts": ts, "action:0-0": "comment", "comment:0-0": " "})
    assert bad.status_code == 400
    assert "lero: error: comment decision for 0-0 needs text in &#39;comment&#39;" in bad.text


def test_unknown_runs_candidates_and_paths_are_404(client):
    client.get(f"/?token={TOKEN}")
    for path in ("/runs/nope", "/runs/r1/candidates/9-9", "/runs/r1/candidates/..%2Fspec.json", "/runs/r1/plots/x.png",
                 "/runs/r1/plots/..%2Fspec.json", "/runs/..%2F..%2Fetc/report"):
        assert client.get(path).status_code == 404, path


def test_a_candidate_approved_with_changed_code_is_an_edit():
    pending = {"kind": "candidates", "candidates": [{"candidate_id": "0-0", "code": "a = 1\n"},
                                                    {"candidate_id": "0-1", "code": "b = 2\n"}]}
    form = FormData([("action:0-0", "approve"), ("code:0-0", "a = 1\r\n# mine\r\n"),
                     ("action:0-1", "approve"), ("code:0-1", "b = 2\r\n")])
    assert answer_from_form(form, pending) == {
        "decisions": {"0-0": {"action": "edit", "code": "a = 1\n# mine\n"}, "0-1": {"action": "approve"}},
        "default": "approve"}
    # a refused edit kept in the form: approve as left = approve the shown code (the edit dropped),
    # approve or edit with the text changed = an edit of it
    refused = {"kind": "candidates", "candidates": [
        {"candidate_id": "0-0", "code": "a = 1\n", "refused_edit": {"code": "a = (\n", "reason": "syntax"}}]}
    kept = FormData([("action:0-0", "approve"), ("code:0-0", "a = (\r\n")])
    assert answer_from_form(kept, refused)["decisions"] == {"0-0": {"action": "approve"}}
    fixed = FormData([("action:0-0", "approve"), ("code:0-0", "a = (1)\r\n")])
    assert answer_from_form(fixed, refused)["decisions"] == {"0-0": {"action": "edit", "code": "a = (1)\n"}}
    generation = answer_from_form(FormData([("action", "stop"), ("feedback", "  ")]), {"kind": "generation"})
    assert generation == {"action": "stop", "feedback": None}


def test_pending_question_is_the_last_unanswered_interrupt(tmp_path):
    rundir = waiting_run(tmp_path)
    assert pending_question(load_run(rundir.path))["kind"] == "candidates"
    rundir.append_event("interrupt_answered", kind="candidates", answer={})
    assert pending_question(load_run(rundir.path)) is None
    rundir.append_event("interrupt", kind="generation", payload={"kind": "generation", "question": "more?"})
    assert pending_question(load_run(rundir.path))["question"] == "more?"
    rundir.update_state(status="running")
    assert pending_question(load_run(rundir.path)) is None


def test_lero_ui_gives_its_assistant_the_llm_timeout_and_window(tmp_path):
    """`lero ui --context-tokens 2048`: the chat page's assistant asks for a quarter of that
    window per reply (512 tokens; the default window, 4096, would give 1024), and the experiment
    it drafts keeps both settings for the run it starts."""
    import httpx

    from tests.support.openai_server import OpenAIServer
    from tests.support.ui_server import UIServer

    with OpenAIServer() as llm:
        llm.push('{"answer": "yes"}', "{}", "a plan")  # the schema probe, the spec filled (nothing), the reply
        server = UIServer(tmp_path, "--llm", "openai:test-model", "--base-url", llm.base_url,
                          "--context-tokens", "2048", "--llm-timeout", "30", env={"OPENAI_API_KEY": "x"})
        try:
            with httpx.Client(base_url=server.base, follow_redirects=True, timeout=60) as client:
                home = client.get(f"/?token={server.token}")
                csrf = re.search(r'name="csrf" value="([0-9a-f]+)"', home.text).group(1)
                chat = client.post("/chat", data={"csrf": csrf, "line": "plan an experiment"})
                assert chat.status_code == 200 and "a plan" in chat.text
                shown = html.unescape(client.post("/chat", data={"csrf": csrf, "line": "/spec"}).text)
                rows = [line.split()[:2] for line in shown.splitlines()]  # the spec's fields that differ
                assert ["llm_timeout_s", "30.0"] in rows and ["context_tokens", "2048"] in rows
        finally:
            server.close()
    assert [request["max_tokens"] for request in llm.requests] == [16, 512, 512]  # the probe asks for 16


def test_the_start_form_shows_lero_runs_defaults_and_passes_the_llm_settings(client):
    """The form's values and menus come from RunSpec and the algorithm table, so a run started
    from the page untouched is the run `lero run` would start; the LLM fields reach its spec."""
    from lero.app.ui.app import spec_from_form
    from lero.training import ALGOS

    html = client.get(f"/?token={TOKEN}").text
    defaults = RunSpec()
    for name in ("env", "generations", "population", "steps", "seeds"):
        assert re.search(rf'name="{name}" value="{getattr(defaults, name)}"', html), name
    menus = {name: re.findall(r"<option( selected)?>([\w-]+)</option>",
                              re.search(rf'<select name="{name}">(.*?)</select>', html).group(1))
             for name in ("algo", "sandbox", "approve")}
    assert [choice for _, choice in menus["algo"]] == list(ALGOS)
    assert {name: [c for s, c in options if s] for name, options in menus.items()} == {
        "algo": [defaults.algo], "sandbox": [defaults.sandbox], "approve": [defaults.approve]}
    form = FormData([("llm", "openai:m"), ("base_url", "http://127.0.0.1:9/v1"), ("llm_timeout_s", "1200"),
                     ("context_tokens", "4096"), ("seeds", "")])
    spec = spec_from_form(form, "runs")
    assert (spec.llm_timeout_s, spec.context_tokens, spec.base_url) == (1200.0, 4096, "http://127.0.0.1:9/v1")
    assert spec.seeds == defaults.seeds


def test_runs_from_the_chat_page_keep_the_llm_settings_lero_ui_was_given(tmp_path, monkeypatch):
    """`lero ui --llm-timeout 30 --context-tokens 2048`: the chat page's draft experiment (the
    spec its run is started from) keeps both, as `lero chat`'s does."""
    monkeypatch.chdir(tmp_path)
    settings = {"llm_timeout_s": 30.0, "context_tokens": 2048}
    app = create_app("runs", TOKEN, 8765, LLMConfig.from_spec("offline"), cwd=tmp_path, llm_settings=settings)
    with TestClient(app, base_url="http://127.0.0.1:8765") as test_client:
        assert test_client.get(f"/chat?token={TOKEN}").status_code == 200
        spec = app.state.chat.desk.spec
    app.state.chat.close()
    app.state.workers.close()
    assert (spec.llm_timeout_s, spec.context_tokens, spec.runs_dir) == (30.0, 2048, str(tmp_path / "runs"))


def test_the_run_page_shows_halvings_rungs_and_who_it_stopped(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    rundir = RunDir.create(RunSpec(run_id="h", runs_dir="runs", sandbox="process", schedule="halving", steps=4000, seeds=1))
    seed = {"seed": 0, "status": "ok", "fitness": -20.0}
    for cid, reached, stopped in (("0-0", 0, 1000), ("0-1", 2, None)):
        rundir.write_candidate(cid, CODE, "# Reviews\n")
        rundir.write_result(cid, {"candidate_id": cid, "generation": 0, "status": "ok", "fitness": -20.0,
                                  "per_seed": [seed], "rung": reached, "stopped_at": stopped})  # fmt: skip
    rundir.update_state(status="completed", env_steps=7000)
    app = create_app("runs", TOKEN, 8765, LLMConfig.from_spec("offline"), cwd=tmp_path)
    with TestClient(app, base_url="http://127.0.0.1:8765") as browser:
        page = browser.get(f"/runs/h?token={TOKEN}").text
    app.state.workers.close()
    text = " ".join(html.unescape(re.sub(r"<[^>]+>", " ", page)).split())
    assert "successive halving: rungs to 1000 / 2000 / 4000 steps, reached by 2 / 1 / 1 candidates" in text
    assert "(halving stopped it at 1000 steps)" in text and text.count("halving stopped it") == 1


def test_a_server_on_port_0_names_its_cookie_by_the_port_it_got(tmp_path):
    """Two `lero ui --port 0` on one host must not overwrite each other's cookie."""
    import httpx

    from tests.support.ui_server import UIServer

    server = UIServer(tmp_path)
    try:
        port = int(server.base.rsplit(":", 1)[1])
        answer = httpx.get(server.url, follow_redirects=False)
        assert answer.status_code == 303 and answer.headers["set-cookie"].startswith(f"{cookie_name(port)}=")
    finally:
        server.close()
