"""lero's engine: the LangGraph state machine, its runtime context, durable runs, the run
directory and report.json (the app around it lives in `lero.app`).

`graph.build_graph()` returns the uncompiled StateGraph; the compiled module-level graph
(no checkpointer; invoke it with `context=RunContext`) is `graph.graph:graph`, and
`langgraph dev` serves `graph.server:make_graph`. They load lazily, so importing
`graph.configuration` or the CLI's training-only commands do not pull in the agents and
the sandbox.
"""

from typing import Any

__all__ = ["build_graph"]


def __getattr__(name: str) -> Any:
    if name == "build_graph":
        from lero.graph.graph import build_graph

        return build_graph
    raise AttributeError(f"module 'graph' has no attribute {name!r}")
