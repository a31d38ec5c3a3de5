"""The graph's nodes, one module per phase of a generation."""

from lero.graph.nodes.approval import (
    approve_candidates,
    approve_generation,
    approve_spec,
    normalize_answer,
)
from lero.graph.nodes.confirm import confirm
from lero.graph.nodes.design import critique, design, revise, setup
from lero.graph.nodes.reflect import finish, reflect
from lero.graph.nodes.train import promote, route_rungs, select, train, training_sends
from lero.graph.nodes.validate import debug, validate

__all__ = [
    "approve_candidates", "approve_generation", "approve_spec", "confirm", "critique", "debug", "design",
    "finish", "normalize_answer", "promote", "reflect", "revise", "route_rungs", "select", "setup", "train",
    "training_sends", "validate",
]
