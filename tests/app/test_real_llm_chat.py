"""`lero chat` against a real model, as a new user types it: SmolLM2-135M behind
llama-cpp-python's server answers one turn of the experiment assistant.

llama-cpp-python's server does not state its window, so `--context-tokens` gives it. The
assistant's first request (system prompt, the spec, one question; the server leaves the
tool list out of SmolLM2's template) is about 600 tokens, and the conversation is fitted to
the window (agents.fit.fit_conversation), so a stated window of 1024 holds it; that window
also caps each reply at a quarter of it (256 tokens): one short turn on a 2048-token server.
"""

from __future__ import annotations

import io
import logging
import re
import sys

import pytest

from tests.support.cli import lero
from tests.support.llama_server import MODEL_ID

pytestmark = [pytest.mark.real_llm, pytest.mark.slow]
CONTEXT_TOKENS = 1024
REPLY_CAP = CONTEXT_TOKENS // 4  # agents.fit.reply_room


def test_lero_chat_answers_one_real_turn(llama_server, tmp_path, monkeypatch, capsys, caplog):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "stdin", io.StringIO("Which environments can I train on?\n/quit\n"))
    caplog.set_level(logging.INFO, logger="lero.agents.llm")
    before = llama_server.requests()
    code, out, err = lero(["chat", "--llm", f"openai:{MODEL_ID}", "--base-url", llama_server.base_url,
                           "--context-tokens", str(CONTEXT_TOKENS), "--llm-timeout", "600"], capsys)
    assert code == 0, err + out
    assert f"lero experiment assistant ({MODEL_ID})" in out
    answer = out.split("assistant>", 1)[1].split("you>", 1)[0] if "assistant>" in out else ""
    assert answer.strip(), out  # a real, non-empty reply was printed
    assert "assistant unavailable" not in out
    # as the server logged them: the two structured-output probes (json_schema refused with 500,
    # json_object kept), the spec filled from the words (nothing named), then the turn's one request
    assert llama_server.requests() - before == 4
    assert "from your words" not in out
    assert f"context window {CONTEXT_TOKENS} tokens (context_tokens setting)" in caplog.text
    generated = [int(n) for n in re.findall(r"eval time =\s+[\d.]+ ms /\s+(\d+) runs", llama_server.log_path.read_text(errors="replace"))]
    assert generated and generated[-1] <= REPLY_CAP  # max_tokens came from the --context-tokens window
    assert not (tmp_path / "runs").exists()  # a question is no run
