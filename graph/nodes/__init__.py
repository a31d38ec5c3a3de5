"""The graph's nodes, one module per phase of a generation, and the candidate stages they
serve (`graph.stages`), declared in the order of the main line."""

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
from lero.graph.stages import CandidateStage, register_stage

for _stage in (
    CandidateStage("review", critique, rounds=lambda spec: 1 + spec.critic_rounds),
    CandidateStage("revise", revise, beside="review", rounds=lambda spec: spec.critic_rounds),
    # a measured revision (graph.nodes.validate) sends a candidate back through validation once per critic round
    CandidateStage("validate", validate, after="review", rounds=lambda spec: 1 + spec.critic_rounds),
    CandidateStage("debug", debug, beside="validate"),
    CandidateStage("ready", approve_candidates, after="validate"),
):
    register_stage(_stage)

__all__ = [
    "approve_candidates", "approve_generation", "approve_spec", "confirm", "critique", "debug", "design",
    "finish", "normalize_answer", "promote", "reflect", "revise", "route_rungs", "select", "setup", "train",
    "training_sends", "validate",
]
