"""A run's start against an LLM server that is there but busy: llama.cpp's servers answer one
request at a time, so while one run's request generates, a second run's GET /models gets the
connection and no answer. That is not an unreachable server: the run goes on (its requests wait
the full --llm-timeout), where it used to stop with "cannot reach the LLM server"."""

from __future__ import annotations

import logging

import pytest

from lero.agents import llm_config
from lero.graph.configuration import RunError, RunSpec
from lero.graph.runner import check_llm_reachable
from tests.support.openai_server import OpenAIServer


def test_a_busy_server_is_reachable_and_a_closed_port_is_not(monkeypatch, caplog) -> None:
    monkeypatch.setattr(llm_config, "PROBE_TIMEOUT_S", 0.2)
    with OpenAIServer() as server:
        server.models_delay_s = 1.0
        with caplog.at_level(logging.WARNING):
            check_llm_reachable(RunSpec(llm="openai:test-model", base_url=server.base_url))
        assert len(server.models_auth) == 1  # it was asked, and kept the connection past the probe's wait
    assert "did not answer in 0.2 s (busy with another client's request?); going on" in caplog.text
    with pytest.raises(llm_config.LLMServerBusy), OpenAIServer() as server:
        server.models_delay_s = 1.0
        llm_config.server_models(server.base_url)
    with pytest.raises(RunError, match="cannot reach the LLM server"):
        check_llm_reachable(RunSpec(llm="openai:test-model", base_url="http://127.0.0.1:9/v1"))
