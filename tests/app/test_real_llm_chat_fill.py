"""`lero chat` with SmolLM2-135M behind llama-cpp-python's server fills the spec from plain
words through the spec's JSON schema (app.chat.spec_fill): one plain sentence sets N=4, vdn
and 200,000 steps once the person agrees to what is shown."""

from __future__ import annotations

import io
import sys

import pytest

from tests.support.cli import lero
from tests.support.llama_server import MODEL_ID

pytestmark = [pytest.mark.real_llm, pytest.mark.slow]
SENTENCE = "I want to train 4 agents on simple_spread with VDN for 200k steps"


def test_smollm2_fills_agents_algorithm_and_steps_from_one_sentence(llama_server, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "stdin", io.StringIO(f"{SENTENCE}\ny\n/quit\n"))
    code, out, err = lero(["chat", "--llm", f"openai:{MODEL_ID}", "--base-url", llama_server.base_url,
                           "--context-tokens", "2048", "--llm-timeout", "600"], capsys)
    assert code == 0, err + out
    shown = out.split("from your words:", 1)[1].splitlines()[0]
    assert {"N=4", "algo=vdn", "steps=200000"} <= {part.strip() for part in shown.split(",")}, out
    table = [line.split()[:2] for line in out[out.index("updated:\n"):].splitlines()]  # the spec's changed fields
    assert ["env.N", "4"] in table and ["algo", "vdn"] in table and ["steps", "200,000"] in table
    assert not (tmp_path / "runs").exists()  # words are no run
