"""lero's orchestration: the LangGraph state machine, durable runs, CLI and reports.

`graph.build_graph()` returns the uncompiled StateGraph; the compiled module-level graph
(no checkpointer, served by `langgraph dev`) is `graph.graph:graph`. Both load lazily, so
`import graph.configuration` or the CLI's training-only commands do not pull in the agents
and the sandbox.
"""

from typing import Any

__all__ = ["build_graph"]


def __getattr__(name: str) -> Any:
    if name == "build_graph":
        from lero.graph.graph import build_graph

        return build_graph
    raise AttributeError(f"module 'graph' has no attribute {name!r}")
