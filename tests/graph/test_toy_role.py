"""The role recipe's rehearsal: a toy role that audits candidates, added from this module alone.

The auditor (its class, its prompt, its node, its stage after the critic's `review`) is
declared here with `agents.team.register_role` and `graph.stages.register_stage`; no file
of the package changes. A run against the scripted OpenAI-compatible server must call it
after the critic, drop the candidate it fails and train the one it passes.
"""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.messages import HumanMessage, SystemMessage
from langgraph.runtime import Runtime

from lero.agents import team as team_module
from lero.agents.llm import ChatModel
from lero.graph import stages
from lero.graph.configuration import RunSpec
from lero.graph.context import RunContext
from lero.graph.graph import build_graph, recursion_limit
from lero.graph.nodes.candidates import drop
from lero.graph.nodes.design import llm_pass
from lero.graph.rundir import RunDir
from lero.graph.runner import start_run
from lero.graph.state import Candidate, RunState
from tests.graph.test_graph_e2e import RecordingUI, events, read
from tests.graph.test_llm_loop import Script, llm_spec, module, user_text
from tests.support.openai_server import OpenAIServer, Reply

AUDITOR_PROMPT = "You are the auditor: answer PASS or FAIL on the first line, then one reason."


class Auditor:
    """Says whether a reviewed module may be validated (PASS) or not (FAIL)."""

    def __init__(self, model: ChatModel) -> None:
        self.model = model

    def passes(self, code: str) -> bool:
        messages = [SystemMessage(AUDITOR_PROMPT), HumanMessage(code)]
        reply = self.model.replies("auditor", messages, n=1, temperature=0.0)[0]
        return reply.text.strip().upper().startswith("PASS")


AUDIT_ROUNDS = stages.Bound("audit_rounds", default=1, maximum=3, help="opinions asked before a candidate is failed")


def audit(state: RunState, runtime: Runtime[RunContext]) -> dict[str, Any]:
    """Every candidate waiting in `audit`: on to what follows once an opinion passes it, or
    dropped when `audit_rounds` opinions all failed it."""

    def one(res: RunContext, candidate: Candidate) -> Candidate:
        for _ in range(res.spec.bound(AUDIT_ROUNDS.name)):
            if res.team.auditor.passes(candidate["code"]):
                return {**candidate, "stage": stages.onward("audit")}
        return drop(candidate, "rejected_by_auditor", "the auditor failed it")

    def unaudited(res: RunContext, candidate: Candidate) -> Candidate:  # the LLM stopped: no audit
        return {**candidate, "stage": stages.onward("audit")}

    return llm_pass(state, runtime.context, "audit", one, unaudited)


def declare_auditor(monkeypatch: pytest.MonkeyPatch) -> None:
    """The toy role and its stage, registered until `monkeypatch` undoes it (the recipe's
    two declarations; tests/test_recipes.py performs them too)."""
    monkeypatch.setattr(stages, "STAGES", list(stages.STAGES))
    monkeypatch.setattr(team_module, "ROLES", dict(team_module.ROLES))
    team_module.register_role("auditor", team_module.Role(lambda model, cfg: Auditor(model)))
    stages.register_stage(stages.CandidateStage("audit", audit, after="review", bound=AUDIT_ROUNDS))


@pytest.fixture
def auditor(monkeypatch):
    declare_auditor(monkeypatch)


class AuditScript(Script):
    """Script's designer and critic; the auditor fails the module weighted 0.1."""

    def __call__(self, request: dict) -> Reply:
        system = next(m["content"] for m in request["messages"] if m["role"] == "system")
        if system.startswith("You are the auditor"):
            return Reply("FAIL: gameable" if "0.1 * near" in user_text(request) else "PASS: fine")
        return super().__call__(request)


def test_a_registered_stage_is_wired_after_its_anchor(auditor) -> None:
    assert [stage.name for stage in stages.ordered()] == ["review", "revise", "audit", "validate", "debug", "ready"]
    assert stages.onward("review") == "audit" and stages.onward("audit") == "validate"
    assert "audit" in build_graph().nodes
    with pytest.raises(ValueError, match="not declared"):
        stages.register_stage(stages.CandidateStage("late", audit, after="nowhere"))
    with pytest.raises(ValueError, match="taken"):
        team_module.register_role("critic", team_module.Role(lambda model, cfg: None))


def test_a_declared_bound_is_a_run_setting_and_a_flag(auditor) -> None:
    from lero.app.cli.args import build_parser, spec_fields
    from lero.graph.configuration import RunError

    assert RunSpec().bound("audit_rounds") == 1  # the declared default
    assert RunSpec.parse({"bounds": {"audit_rounds": 3}}).bound("audit_rounds") == 3
    with pytest.raises(RunError, match=r"audit_rounds must be 0\.\.3"):
        RunSpec.parse({"bounds": {"audit_rounds": 4}})
    with pytest.raises(RunError, match="no stage declares a bound 'review_rounds'"):
        RunSpec.parse({"bounds": {"review_rounds": 1}})
    args = build_parser().parse_args(["run", "--bound", "audit_rounds=2"])
    assert RunSpec.parse(spec_fields(args)).bound("audit_rounds") == 2


def test_the_recursion_limit_counts_a_registered_stage(monkeypatch) -> None:
    spec = RunSpec(generations=1, critic_rounds=0, debug_attempts=2)
    before = recursion_limit(spec)
    monkeypatch.setattr(stages, "STAGES", list(stages.STAGES))
    stages.register_stage(stages.CandidateStage("audit", audit, after="review", rounds=lambda spec: 2))
    assert recursion_limit(spec) == before + 2 * (1 + spec.debug_attempts) * 2


@pytest.mark.slow
def test_the_toy_role_audits_candidates_in_a_scripted_run(tmp_path, auditor) -> None:
    passed, failed = module(0.3), module(0.1)
    with OpenAIServer() as server:
        server.script = AuditScript(first_designs=[passed, failed])
        outcome = start_run(llm_spec(tmp_path, server, population=2, bounds={"audit_rounds": 2}), RecordingUI())
        requests = list(server.requests)
    assert outcome.status == "completed"
    roles = ["auditor" if r["messages"][0]["content"].startswith("You are the auditor") else "other" for r in requests]
    assert roles[-3:] == ["auditor"] * 3 and roles.count("auditor") == 3  # after both critic reviews
    log = events(outcome.run_dir)

    def stages_of(candidate_id: str) -> list[tuple[str, str | None]]:
        return [(e["stage"], e["status"]) for e in log if e["event"] == "candidate" and e["candidate_id"] == candidate_id]

    assert stages_of("0-0")[:3] == [("review", None), ("audit", None), ("validate", None)]
    assert ("ready", "ok") in stages_of("0-0")
    assert stages_of("0-1") == [("review", None), ("audit", None), ("dropped", "rejected_by_auditor")]
    assert read(outcome.run_dir / "candidates" / "0-0" / "result.json")["status"] == "ok"
    records = RunDir(outcome.run_dir).read_llm_records()  # kept under llm/ like every role's
    assert [(r["role"], r["candidate_id"]) for r in records if r["role"] == "auditor"] == [
        ("auditor", "0-0"), ("auditor", "0-1"), ("auditor", "0-1")]  # its bound: two opinions on 0-1
