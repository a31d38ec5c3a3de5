"""The LLM loop driven through the whole graph against the scripted OpenAI-compatible server.

Each test scripts the server by role (the first line of every system prompt names it),
runs the real graph with the process sandbox and real (tiny) training, and asserts on
what the server received as much as on what the run wrote.
"""

from __future__ import annotations

import io
import json
import re
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from lero.agents.records import code_digest
from lero.agents.replies import reply_limit
from lero.app.cli.main import main
from lero.app.cli.run_hooks import app_front
from lero.graph.configuration import RunSpec
from lero.graph.rundir import RunDir
from lero.graph.runner import resume_run, start_run
from tests.graph.test_graph_e2e import TINY, RecordingUI, events, read
from tests.support.openai_server import OpenAIServer, Reply

MODULE = '''import torch


def hybrid_reward(ctx):
    gap = torch.linalg.vector_norm(ctx.state["landmark_pos"][:, None, :, :] - ctx.state["agent_pos"][:, :, None, :], dim=-1)
    near = -gap.min(dim=2).values  # [B, N]
    return ctx.env_reward + WEIGHT * near, {"near": near}


def enhance_observation(obs):
    return torch.cat([obs, obs[:, 4:6].norm(dim=1, keepdim=True)], dim=1)
'''
# a key the env lacks, through a constant: the gate checks literal keys only (`ctx-field`), so
# this one reaches validation as a KeyError
BROKEN = MODULE.replace('ctx.state["landmark_pos"]', "ctx.state[LANDMARKS]").replace(
    "\n\ndef hybrid_reward", '\nLANDMARKS = "landmark_positions"\n\n\ndef hybrid_reward', 1)


def module(weight: float) -> str:
    return MODULE.replace("WEIGHT", repr(weight))


def fenced(code: str) -> str:
    return f"My design.\n```python\n{code}```\nDone."


def role(request: dict) -> str:
    system = next(m["content"] for m in request["messages"] if m["role"] == "system")
    first = system.splitlines()[0]
    for name in ("critic", "debugger", "designer"):
        if f"the {name}" in first:
            return name
    raise AssertionError(f"unknown role: {first}")


def user_text(request: dict) -> str:
    return next(m["content"] for m in request["messages"] if m["role"] == "user")


class Script:
    """Distinct designs (a new weight each), a critic verdict queue, and debugger fixes."""

    def __init__(self, first_designs: list[str] | None = None, verdicts: list[str] | None = None,
                 fixes: list[str] | None = None) -> None:
        self.first_designs = list(first_designs or [])
        self.verdicts = list(verdicts or [])
        self.fixes = list(fixes or [])
        self.weight = 0.0

    def __call__(self, request: dict) -> Reply:
        name = role(request)
        if name == "critic":
            return Reply(self.verdicts.pop(0) if self.verdicts else "VERDICT: accept\n- fine")
        if name == "debugger":
            return Reply(fenced(self.fixes.pop(0)))
        replies = []
        for _ in range(int(request.get("n") or 1)):
            if self.first_designs:
                replies.append(fenced(self.first_designs.pop(0)))
            else:
                self.weight += 0.05
                replies.append(fenced(module(round(self.weight, 2))))
        return Reply(content=replies)


def llm_spec(tmp_path: Path, server: OpenAIServer, **overrides: Any) -> RunSpec:
    values = {**TINY, "population": 1, "sandbox": "process", "runs_dir": str(tmp_path / "runs"), "run_id": "t",
              "llm": "openai:test-model", "base_url": server.base_url, "design": "code", **overrides}
    return RunSpec.parse(values)


def sha_of_header(review_md: str) -> list[str]:
    return re.findall(r"code ([0-9a-f]{16})\)", review_md)


@pytest.mark.slow
def test_critic_asks_for_a_revision_then_accepts_the_revised_code(tmp_path):
    first, revised = module(0.3), module(0.1)
    script = Script(first_designs=[first, revised],
                    verdicts=["VERDICT: revise\n- the near term is too strong: scale it to 0.1",
                              "VERDICT: accept\n- scaled"])
    with OpenAIServer() as server:
        server.script = script
        outcome = start_run(llm_spec(tmp_path, server), RecordingUI())
        requests = list(server.requests)
    assert outcome.status == "completed"
    assert [role(r) for r in requests] == ["designer", "critic", "designer", "critic"]
    assert "0.3 * near" in user_text(requests[1])
    assert "scale it to 0.1" in user_text(requests[2])  # the revise prompt carries the review
    assert "0.1 * near" in user_text(requests[3])  # the critic saw the revised code
    folder = outcome.run_dir / "candidates" / "0-0"
    code = (folder / "candidate.py").read_text()
    assert code.startswith("# lero: candidate 0-0 (explore)") and "0.1 * near" in code
    review_md = (folder / "review.md").read_text()
    assert "(critic, code " in review_md and ": revise" in review_md and ": accept" in review_md
    assert sha_of_header(review_md)[-1] == code_digest(code)  # the last verdict is on the trained code
    assert read(folder / "result.json")["status"] == "ok"


@pytest.mark.slow
def test_a_keyerror_in_validation_is_repaired_by_the_debugger_and_the_fix_is_reviewed(tmp_path):
    fix = module(0.2)
    script = Script(first_designs=[BROKEN], fixes=[fix])
    with OpenAIServer() as server:
        server.script = script
        outcome = start_run(llm_spec(tmp_path, server), RecordingUI())
        requests = list(server.requests)
    assert outcome.status == "completed"
    assert [role(r) for r in requests] == ["designer", "critic", "debugger", "critic"]
    prompt = user_text(requests[2])
    assert "KeyError" in prompt and "landmark_positions" in prompt
    assert re.search(r"line \d+", prompt) and "hybrid_reward" in prompt  # the trimmed traceback
    assert "site-packages" not in prompt and "lero/training" not in prompt  # engine frames trimmed
    assert "0.2 * near" in user_text(requests[3])  # the fix went through the gate
    log = events(outcome.run_dir)
    validations = [e for e in log if e["event"] == "job_finished" and e["kind"] == "validate"]
    assert [e["status"] for e in validations] == ["code_error", "ok"]
    stages = [e["stage"] for e in log if e["event"] == "candidate" and e["candidate_id"] == "0-0"]
    assert stages == ["review", "validate", "debug", "review", "validate", "ready"]
    assert read(outcome.run_dir / "candidates" / "0-0" / "result.json")["status"] == "ok"
    records = RunDir(outcome.run_dir).read_llm_records()  # every request kept under llm/
    assert len(records) == len(requests) == read(outcome.run_dir / "report.json")["llm"]["requests"]
    assert [(r["role"], r["candidate_id"]) for r in records] == [
        ("designer", None), ("critic", "0-0"), ("debugger", "0-0"), ("critic", "0-0")]
    assert records[2]["prompt"][1]["content"] == prompt and "ctx.state['landmark_pos']" in prompt
    assert records[2]["replies"] == [fenced(fix)] and records[2]["finish_reasons"] == ["stop"]
    assert all(r["prompt_tokens"] > 0 and r["elapsed_s"] >= 0 for r in records)
    calls = [e for e in log if e["event"] == "llm_call"]
    assert [c["record"] for c in calls] == [r["record"] for r in records] and "prompt" not in calls[0]


@pytest.mark.slow
def test_a_human_edit_adding_import_os_is_stopped_by_the_gate(tmp_path):
    with OpenAIServer() as server:
        server.script = Script()
        stopped = start_run(llm_spec(tmp_path, server, approve="candidates"), RecordingUI())
        offered = stopped.interrupt["candidates"][0]
        assert offered["review"]["code_sha"] == offered["code_sha"] == code_digest(offered["code"])
        edited = "import os\n" + offered["code"].replace("return ctx.env_reward", "os.system('id')\n    return ctx.env_reward")
        ui = RecordingUI(answers=["approve"])
        outcome = resume_run("t", tmp_path / "runs", ui,
                             answer={"decisions": {"0-0": {"action": "edit", "code": edited}}})
        requests = list(server.requests)
    assert outcome.status == "completed"
    again = ui.asked[0]["candidates"][0]  # the module before the edit, asked about again
    assert again["code"] == offered["code"] and again["review"]["code_sha"] == code_digest(again["code"])
    assert "stopped by the gate" in again["note"] and "'os'" in again["note"]
    # the person's text comes back beside the reason, to fix or drop
    assert "os.system('id')" in again["refused_edit"]["code"] and "'os'" in again["refused_edit"]["reason"]
    from lero.app.reports.run_report import write_report

    write_report(outcome.run_dir)
    md = (outcome.run_dir / "report.md").read_text()
    assert "## Your decisions" in md and "| 0 | `0-0` | edit | " in md
    assert "| 0 | `0-0` | edit refused by the gate (not trained) |" in md
    assert not any("import os" in json.dumps(r) for r in requests)  # no LLM saw it: the gate needs none
    folder = outcome.run_dir / "candidates" / "0-0"
    assert "import os" not in (folder / "candidate.py").read_text()
    assert "(gate, code " in (folder / "review.md").read_text()
    log = events(outcome.run_dir)
    assert len([e for e in log if e["event"] == "job_started" and e["kind"] == "validate"]) == 1
    assert read(folder / "result.json")["status"] == "ok"


@pytest.mark.slow
def test_three_generations_refine_elites_with_feedback_once_per_prompt(tmp_path):
    answers = [{"action": "continue", "feedback": "PREFER SPREADING OUT"}, {"action": "continue"}]
    ui = RecordingUI(answers=answers)
    with OpenAIServer() as server:
        server.script = Script()
        outcome = start_run(llm_spec(tmp_path, server, generations=3, population=2, exploit_fraction=0.5,
                                     approve="generations"), ui, front=app_front())  # report.md: the app's
        requests = list(server.requests)
    assert outcome.status == "completed"
    log = events(outcome.run_dir)
    designs = [r for r in requests if role(r) == "designer"]
    later = [user_text(r) for r in designs[1:]]  # generations 1 and 2
    exploit = [text for text in later if "# Elite to refine:" in text]
    assert len(exploit) == 2 and len(later) == 4
    for text in later:
        assert text.count("PREFER SPREADING OUT") == 1  # the feedback, exactly once
        assert text.count("# Tips") == 1
    elite_codes = {e["candidate_id"]: e for e in log if e["event"] == "candidate"}
    for text in exploit:
        elite_id = re.search(r"# Elite to refine: (\S+)", text)[1]
        code = (outcome.run_dir / "candidates" / elite_id / "candidate.py").read_text()
        assert code.strip() in text  # the elite's own code
        assert elite_codes[elite_id]["generation"] < 2
    kinds = {(e["candidate_id"], e["kind"], tuple(e["parents"])) for e in log if e["event"] == "candidate"}
    assert {k for _, k, _ in kinds} == {"exploit", "explore"}
    assert all(parents for _, kind, parents in kinds if kind == "exploit")
    calls = [e for e in log if e["event"] == "llm_call"]
    assert len(calls) == len(requests) and all(e["prompt_chars"] > 0 for e in calls)
    report = read(outcome.run_dir / "report.json")
    assert report["lineage"] and all("kind" in row for row in report["lineage"])
    assert "## Lineage of the elites" in (outcome.run_dir / "report.md").read_text()
    summary = {"requests": len(requests), "by_role": {}, "prompt_chars": [e["prompt_chars"] for e in calls]}
    for e in calls:
        summary["by_role"][e["role"]] = summary["by_role"].get(e["role"], 0) + 1
    print("LLM_LOOP_SUMMARY", json.dumps(summary))


@pytest.mark.slow
def test_a_server_answering_500_midway_stops_the_run_and_the_gate_still_runs(tmp_path, monkeypatch):
    """Generation 1's designer answers, then every request gets 500: the critic's review of
    1-0 is replaced by the gate alone, 1-0 still trains, and the run ends `stopped`."""
    script = Script()

    def failing_midway(request: dict) -> Reply:
        designs = sum(role(r) == "designer" for r in server.requests)
        if designs >= 2 and not (role(request) == "designer" and designs == 2):
            return Reply(status=500, headers={"Retry-After": "0"}, error_message="the model crashed")
        return script(request)

    monkeypatch.chdir(tmp_path)  # the README's way: default relative runs/
    (tmp_path / "tiny.json").write_text(json.dumps({k: v for k, v in TINY.items() if k != "generations"}))
    shown = io.StringIO()
    with OpenAIServer() as server:
        server.script = failing_midway
        code = main(["run", "--config", "tiny.json", "--generations", "3", "--population", "1",
                     "--llm", "openai:test-model", "--base-url", server.base_url, "--sandbox", "process", "--design", "code",
                     "--run-id", "t"], console=Console(file=shown, width=200))
        roles = [role(r) for r in server.requests]
    last_line = shown.getvalue().strip().splitlines()[-1]
    run_dir = tmp_path / "runs" / "t"
    report = read(run_dir / "report.json")
    assert code == 1
    assert report["status"] == "stopped" and report["stop_reason"].startswith("llm_error")
    assert "stopped" in (run_dir / "report.md").read_text()
    assert roles[:4] == ["designer", "critic", "designer", "critic"]  # the 4th answered 500
    review_md = (run_dir / "candidates" / "1-0" / "review.md").read_text()
    assert "(gate, code " in review_md  # the checks that need no LLM still ran
    assert read(run_dir / "candidates" / "1-0" / "result.json")["status"] == "ok"
    assert not (run_dir / "candidates" / "2-0").exists()
    assert "stopped" in last_line and "llm_error" in last_line  # the CLI's last line says why


def test_exploit_fraction_flag_is_validated_at_the_edge(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    code = main(["run", "--exploit-fraction", "1.5", "--llm", "offline", "--sandbox", "process"],
                console=Console(file=io.StringIO(), width=200))
    err = capsys.readouterr().err.strip()
    assert code == 2 and err.startswith("lero: error:") and "exploit_fraction" in err and "\n" not in err
    assert not (tmp_path / "runs").exists()
    assert RunSpec.parse({"exploit_fraction": 0.25}).exploit_fraction == 0.25


@pytest.mark.slow
def test_a_failed_revision_keeps_the_reviewed_code_and_review_md_says_why(tmp_path):
    """The designer answers the critic's revise with prose only: the reviewed code goes on to
    training, and review.md records the failed rewrite with the designer's error."""
    script = Script(first_designs=[module(0.3)],
                    verdicts=["VERDICT: revise\n- the near term is too strong: scale it to 0.1"])
    designs = iter([script, lambda request: Reply("I would rather not change it.")])
    with OpenAIServer() as server:
        server.script = lambda request: (next(designs) if role(request) == "designer" else script)(request)
        outcome = start_run(llm_spec(tmp_path, server), RecordingUI())
    assert outcome.status == "completed"
    folder = outcome.run_dir / "candidates" / "0-0"
    review_md = (folder / "review.md").read_text()
    assert "(designer): revision failed\n\nthe reply contains no Python code block" in review_md
    assert "0.3 * near" in (folder / "candidate.py").read_text()
    assert read(folder / "result.json")["status"] == "ok"


@pytest.mark.slow
def test_a_30_mib_reply_is_cut_recorded_as_cut_and_the_run_goes_on(tmp_path):
    """A model's reply longer than `reply_limit` is cut before anything reads or keeps it: the
    module at its start trains, llm/ keeps the cut text and says so, as the event does."""
    padding = "x" * (30 << 20)
    script = Script()
    with OpenAIServer() as server:
        server.script = lambda request: (Reply(fenced(module(0.3)) + padding) if role(request) == "designer"
                                         else script(request))
        outcome = start_run(llm_spec(tmp_path, server, confirm_steps=0, critic_rounds=0), RecordingUI())
    assert outcome.status == "completed"
    calls = [e for e in events(outcome.run_dir) if e["event"] == "llm_call" and e["role"] == "designer"]
    limit = reply_limit(calls[0]["max_tokens"])
    assert calls and calls[0]["replies_cut"] == [{"choice": 0, "bytes": len(fenced(module(0.3))) + len(padding)}]
    assert calls[0]["reply_limit"] == limit < len(padding)
    record = read(outcome.run_dir / "llm" / calls[0]["record"])
    assert record["replies_cut"] == calls[0]["replies_cut"] and len(record["replies"][0].encode()) == limit
    assert sum(p.stat().st_size for p in (outcome.run_dir / "llm").iterdir()) < 4 * limit
    assert read(outcome.run_dir / "candidates" / "0-0" / "result.json")["status"] == "ok"
