"""The graph's nodes, one module per phase of a generation."""

from graph.nodes.approval import (
    approve_candidates,
    approve_generation,
    approve_spec,
    normalize_answer,
)
from graph.nodes.design import critique, design, revise, setup
from graph.nodes.reflect import finish, reflect
from graph.nodes.train import select, train, training_sends
from graph.nodes.validate import debug, validate

__all__ = [
    "approve_candidates", "approve_generation", "approve_spec", "critique", "debug", "design",
    "finish", "normalize_answer", "reflect", "revise", "select", "setup", "train", "training_sends",
    "validate",
]
