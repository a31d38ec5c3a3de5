"""The graph as a LangGraph server hosts it: no runner, configuration from `configurable`,
the thread id as run id, the runtime context opened by the factory on the first node."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import Command

import lero.graph
from lero.graph.configuration import RunSpec
from lero.graph.graph import build_graph, recursion_limit
from lero.graph.server import SERVER_RUNS_DIR_VARIABLE, hosted_graph

REPO = Path(__file__).resolve().parents[2]


def test_langgraph_json_points_at_a_factory_of_the_compiled_graph():
    path, _, attribute = json.loads((REPO / "langgraph.json").read_text())["graphs"]["lero"].partition(":")
    spec = importlib.util.spec_from_file_location("lero_served_graph", REPO / path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # loaded by file path, as `langgraph dev` does
    with getattr(module, attribute)({"configurable": {}}) as served:  # the server adds its checkpointer
        assert isinstance(served, CompiledStateGraph) and served.checkpointer is None
        assert {"setup", "design", "critique", "validate", "train", "select", "reflect", "finish"} <= set(served.nodes)
    assert lero.graph.build_graph is build_graph
    assert isinstance(lero.graph.graph.graph, CompiledStateGraph)  # the module-level graph, for embedding


def test_recursion_limit_grows_with_every_bounded_loop():
    small = recursion_limit(RunSpec(generations=1, critic_rounds=0, debug_attempts=0))
    assert recursion_limit(RunSpec(generations=2, critic_rounds=0, debug_attempts=0)) > small
    assert recursion_limit(RunSpec(generations=1, critic_rounds=3, debug_attempts=0)) > small
    assert recursion_limit(RunSpec(generations=1, critic_rounds=0, debug_attempts=3)) > small


def test_configurable_drives_a_run_through_an_interrupt_and_a_resume(tmp_path, monkeypatch):
    monkeypatch.setenv(SERVER_RUNS_DIR_VARIABLE, str(tmp_path))  # the server's own runs dir
    monkeypatch.setenv("LERO_SANDBOX", "process")  # the operator's sandbox (a request may not choose one)
    saver = InMemorySaver()
    config = {"configurable": {"thread_id": "thread-7", "run_id": "server-request-1", "approve": "spec",
                               "runs_dir": str(tmp_path), "population": 1}}
    with hosted_graph(saver) as hosted:  # one server request
        hosted.invoke({}, config)
        pending = hosted.get_state(config)
    assert pending.next == ("approve_spec",)
    payload = pending.interrupts[0].value
    assert payload["kind"] == "spec" and payload["spec"]["run_id"] == "thread-7"
    assert payload["spec"]["population"] == 1
    assert (tmp_path / "thread-7" / "spec.json").is_file()

    with hosted_graph(saver) as hosted:  # the next request resumes from the checkpoint
        final = hosted.invoke(Command(resume={"action": "reject"}), {"configurable": {"thread_id": "thread-7"}})
        assert final["stop_reason"] == "rejected_by_human" and hosted.get_state(config).next == ()
    state = json.loads((tmp_path / "thread-7" / "state.json").read_text())
    assert state["status"] == "completed" and state["stop_reason"] == "rejected_by_human"
