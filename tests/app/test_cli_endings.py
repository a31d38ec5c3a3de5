"""Honest endings and the one model rule, through `lero` in a working directory with the
default relative `runs/`, against the real local OpenAI-compatible server.

- 401/403 at preflight: `lero: error: ...`, exit 2, nothing under runs/;
- the server fails (HTTP 500) from some point on: `stopped`, exit 1, the reason in
  report.json, report.md and the last line; `lero resume` once it answers: `completed`;
- a spent request budget: `stopped`; resume needs (and takes) more budget;
- a run whose baseline or every candidate failed in the sandbox ends `failed`.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
import torch

from lero.agents import LLMConfig
from lero.agents.llm_config import choose_llm
from lero.app.reports.run_report import write_report
from lero.graph.configuration import RunSpec
from lero.graph.summary import load_run, run_ending
from tests.app.test_report import make_run_dir
from tests.graph.test_graph_e2e import MODULES
from tests.support.cli import lero
from tests.support.openai_server import OpenAIServer, Reply

TINY = ["--generations", "2", "--population", "1", "--steps", "800", "--sandbox", "process",
        "--run-id", "r"]  # fmt: skip
TINY_CONFIG = {"hparams": {"n_envs": 16, "rollout_len": 25, "epochs": 1}, "eval_episodes": 8,
               "critic_rounds": 0, "debug_attempts": 0}  # fmt: skip


@pytest.fixture(autouse=True)
def _clean_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No key, no server, no model from the developer's shell; cwd = a fresh directory."""
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "LERO_MODEL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)
    torch.set_num_threads(1)


class Designer:
    """Scripted replies by role: the critic accepts, the designer writes a new module each time
    (a repeat of an elite would be dropped as a near-duplicate)."""

    def __init__(self) -> None:
        self.designs = 0

    def __call__(self, request: dict) -> Reply:
        system = next(m["content"] for m in request["messages"] if m["role"] == "system")
        if "the critic" in system.splitlines()[0]:
            return Reply(content="VERDICT: accept\n- bounded and CTDE-safe")
        self.designs += 1
        return Reply(content=f"```python\n{MODULES[self.designs % len(MODULES)]}```")


def last_line(text: str) -> str:
    return text.strip().splitlines()[-1]


def tiny_config(tmp_path: Path) -> list[str]:
    config = tmp_path / "tiny.json"
    config.write_text(json.dumps(TINY_CONFIG))
    return ["--config", str(config)]


# ---------------------------------------------------------------- preflight


@pytest.mark.parametrize("status", [401, 403])
@pytest.mark.parametrize("llm", [["--llm", "openai:test-model"], []])
def test_refused_key_at_preflight_is_exit_2_and_creates_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], status: int, llm: list[str]
) -> None:
    with OpenAIServer() as server:
        server.models_status = status
        code, _, err = lero(["run", *TINY, *llm, "--base-url", server.base_url], capsys)
    assert code == 2, err
    assert err.startswith("lero: error: ") and err.count("\n") == 1
    assert f"HTTP {status}" in err and "OPENAI_API_KEY" in err
    assert not (tmp_path / "runs").exists()


# ---------------------------------------------------------------- the one model rule


def test_model_rule_explicit_llm_then_key_or_base_url_then_offline(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert choose_llm().llm == "offline"
    with pytest.raises(ValueError, match="--model needs OPENAI_API_KEY"):
        choose_llm(model="m")
    with OpenAIServer(model_ids=("first-model", "second-model")) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        assert choose_llm().llm == "openai:first-model"  # the server's first /v1/models entry
        assert choose_llm().base_url == server.base_url
        assert choose_llm(llm="offline").llm == "offline"  # an explicit --llm wins
        assert choose_llm(llm="openai:x").llm == "openai:x"
        monkeypatch.setenv("LERO_MODEL", "env-model")
        assert choose_llm().llm == "openai:env-model"
        assert choose_llm(model="flag-model").llm == "openai:flag-model"  # --model over LERO_MODEL
        assert choose_llm(llm="openai").llm == "openai:env-model"
        # chat's path (LLMConfig.from_spec without --llm) follows the same rule
        assert LLMConfig.from_spec(None).model == "env-model"
        monkeypatch.delenv("LERO_MODEL")
        monkeypatch.delenv("OPENAI_BASE_URL")
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
        assert choose_llm(base_url=server.base_url).llm == "openai:first-model"
        assert server.models_auth[-1] == "Bearer sk-test"


def test_chat_takes_the_model_by_the_same_rule(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO("/quit\n"))
    with OpenAIServer(model_ids=("chat-model",)) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        code, out, err = lero(["chat"], capsys)
    assert code == 0, err
    assert "lero experiment assistant (chat-model)" in out


# ---------------------------------------------------------------- stopped, then resumed


@pytest.mark.slow
def test_server_failing_midway_stops_the_run_and_resume_completes_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fail_from = {"request": 3}  # generation 0's designer and critic answer, then HTTP 500s

    designer = Designer()
    with OpenAIServer(model_ids=("served-model", "other")) as server:

        def script(request: dict) -> Reply:
            if len(server.requests) >= fail_from["request"]:
                return Reply(status=500, headers={"Retry-After": "0"})
            return designer(request)

        server.script = script
        code, out, err = lero(["run", *TINY, *tiny_config(tmp_path), "--base-url", server.base_url],
                              capsys)  # fmt: skip
        assert code == 1, err
        first = out.strip().splitlines()[0]
        assert "llm openai:served-model" in first and server.base_url in first
        assert "sandbox process" in first
        last = last_line(out)
        assert last.startswith("run r: stopped: llm_error") and "HTTP 500" in last
        assert last.endswith("continue with: lero resume r")  # the default runs/: no --runs-dir
        run = tmp_path / "runs" / "r"
        report = json.loads((run / "report.json").read_text())
        assert report["status"] == "stopped" and report["stop_reason"].startswith("llm_error")
        markdown = (run / "report.md").read_text()
        assert "**stopped**" in markdown and "llm_error" in markdown and "lero resume r" in markdown
        assert report["baseline"]["fitness"] is not None
        assert [g["generation"] for g in report["generations"]] == [0]

        fail_from["request"] = 10**9  # the server is back
        code, out, err = lero(["resume", "r"], capsys)
    assert code == 0, err + out
    assert last_line(out) == "run r: completed"
    report = json.loads((run / "report.json").read_text())
    assert report["status"] == "completed" and report["stop_reason"] is None
    assert [(g["generation"], g["candidates"]) for g in report["generations"]] == [(0, 1), (1, 1)]
    assert all(g["valid"] == 1 for g in report["generations"])
    events = load_run(run).events
    trained = [(e["candidate_id"], e["seed"]) for e in events if e["event"] == "train_finished" and not e["cached"]]
    assert len(trained) == len(set(trained))  # nothing finished was trained again
    assert {("baseline", seed) for seed in range(RunSpec().seeds)} <= set(trained)


@pytest.mark.slow
def test_spent_request_budget_stops_and_resume_needs_more(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with OpenAIServer() as server:
        server.script = Designer()
        argv = ["run", *TINY, *tiny_config(tmp_path), "--llm", "openai:test-model", "--design", "code",
                "--base-url", server.base_url, "--max-llm-requests", "2"]  # fmt: skip
        code, out, err = lero(argv, capsys)
        assert code == 1, err
        assert last_line(out).startswith("run r: stopped: llm_budget")
        assert len(server.requests) == 2

        code, _, err = lero(["resume", "r"], capsys)  # the same budget: refused, nothing changes
        assert code == 2 and "--max-llm-requests" in err and err.count("\n") == 1
        code, out, err = lero(["resume", "r", "--max-llm-requests", "10", "--llm-timeout", "120",
                               "--context-tokens", "4096"], capsys)  # fmt: skip
    assert code == 0, err + out
    assert last_line(out) == "run r: completed"
    spec = json.loads((tmp_path / "runs" / "r" / "spec.json").read_text())
    assert (spec["max_llm_requests"], spec["llm_timeout_s"], spec["context_tokens"]) == (10, 120, 4096)
    report = json.loads((tmp_path / "runs" / "r" / "report.json").read_text())
    assert [g["generation"] for g in report["generations"]] == [0, 1]
    assert report["llm"]["requests"] == len(server.requests) == 4


# ---------------------------------------------------------------- failed


def _crash(result_path: Path) -> None:
    result = json.loads(result_path.read_text())
    crashed = {"type": "SandboxUnavailable", "message": "Docker failed while running a sandbox",
               "traceback": ""}  # fmt: skip
    result.update(status="crashed", fitness=None, eval={},
                  per_seed=[{"status": "crashed", "error": crashed, "seed": 0}])  # fmt: skip
    result_path.write_text(json.dumps(result))


def test_a_baseline_that_did_not_train_fails_the_run(tmp_path: Path) -> None:
    run = make_run_dir(tmp_path)
    assert run_ending(load_run(run), None) == ("completed", None)
    assert run_ending(load_run(run), "llm_error: HTTP 500") == ("stopped", "llm_error: HTTP 500")
    _crash(run / "baseline" / "result.json")
    status, reason = run_ending(load_run(run), "llm_error: HTTP 500")
    assert status == "failed" and "baseline did not train" in reason
    assert "Docker failed while running a sandbox" in reason


def test_every_candidate_crashed_in_the_sandbox_fails_the_run(tmp_path: Path) -> None:
    run = make_run_dir(tmp_path)
    candidates = sorted((run / "candidates").iterdir())
    for folder in candidates[:-1]:
        _crash(folder / "result.json")
    assert run_ending(load_run(run), None)[0] == "completed"  # one is left that did not crash
    _crash(candidates[-1] / "result.json")
    status, reason = run_ending(load_run(run), None)
    assert status == "failed" and f"all {len(candidates)} candidates failed in the sandbox" in reason
    state = json.loads((run / "state.json").read_text())
    (run / "state.json").write_text(json.dumps({**state, "status": status, "stop_reason": reason}))
    report = write_report(run)
    assert report["status"] == "failed" and report["stop_reason"] == reason
    assert "**failed**" in (run / "report.md").read_text()
