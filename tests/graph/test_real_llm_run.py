"""`lero run` against a real model, as a new user types it (temp working dir, default runs/).

SmolLM2-135M behind llama-cpp-python's server: the run must end with an honest status and
keep every request under runs/<id>/llm/, as many as report.json counts and as the server
itself logged, and listed in report.md. The request timeout and the window
(llama-cpp-python does not state its n_ctx) come from `--llm-timeout` / `--context-tokens`.
"""

from __future__ import annotations

import json

import pytest

from lero.graph.rundir import RunDir
from tests.graph.test_graph_e2e import TINY
from tests.support.cli import lero
from tests.support.llama_server import MODEL_ID

pytestmark = [pytest.mark.real_llm, pytest.mark.slow]
MAX_REQUESTS = 10  # a cap: one candidate asks the designer, critic, revision, critic and debugger, each maybe continued


def test_lero_run_with_a_real_model_ends_honestly_and_keeps_every_request(llama_server, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    config = tmp_path / "slow-model.json"
    config.write_text(json.dumps({**TINY, "sandbox": "process"}))
    before = llama_server.requests()
    code, out, err = lero(["run", "--llm", f"openai:{MODEL_ID}", "--base-url", llama_server.base_url,
                           "--llm-timeout", "600", "--context-tokens", str(llama_server.n_ctx),
                           "--max-llm-requests", str(MAX_REQUESTS), "--generations", "1", "--population", "1",
                           "--config", str(config), "--run-id", "real"], capsys)  # fmt: skip
    run = RunDir.open("runs", "real")
    report = json.loads((run.path / "report.json").read_text())
    status = report["status"]
    assert status in ("completed", "stopped", "failed"), out + err
    assert code == (0 if status == "completed" else 1)
    assert f"run real: {status}" in out
    if status != "completed":
        assert report["stop_reason"], report  # a reason, never a silent end
    generation = report["generations"][0]
    valid = [c for c in run.candidate_names() if (run.read_result(c) or {}).get("status") == "ok"]
    assert generation["valid"] == len(valid) <= generation["candidates"] <= 1  # no invented work
    records = run.read_llm_records()
    answered = [r for r in records if r["status"] == "ok"]
    assert len(answered) == report["llm"]["requests"] <= MAX_REQUESTS
    assert len(records) == llama_server.requests() - before  # with the probe the server refused (--design auto)
    for record in answered:
        assert record["role"] in ("designer", "critic", "debugger", "probe")
        assert record["prompt"] and record["replies"] and record["finish_reasons"]
        assert record["tokens_estimated"] is False and 0 < record["prompt_tokens"] < llama_server.n_ctx
    first = answered[0]  # lero's own prompt, fitted before the server had counted anything
    assert first["role"] == "designer" and first["prompt_tokens"] + first["max_tokens"] <= llama_server.n_ctx
    assert sum(r["prompt_tokens"] for r in answered) == report["llm"]["prompt_tokens"]
    reviewed = {r["candidate_id"] for r in answered if r["role"] != "designer"}
    assert reviewed <= {"0-0"}  # critic and debugger records name their candidate
    spec = run.read_spec()
    assert (spec.llm_timeout_s, spec.context_tokens) == (600, llama_server.n_ctx)
    report_md = (run.path / "report.md").read_text()
    assert "## LLM requests" in report_md
    for record in records:
        assert f"`llm/{record['record']}`" in report_md  # every request is listed, failed ones too
