"""Golden test of a generation-2 designer prompt: every section once, and a size bound.

The prompt is built from the real pieces a run feeds it: the environment's own
description, the graph's reflection text and each elite's statistics.
"""

from __future__ import annotations

import re

import pytest

from lero.agents.designer import Designer
from lero.agents.records import Elite
from lero.graph.configuration import RunSpec
from lero.graph.context import problem
from lero.graph.reflection import candidate_feedback, generation_reflection
from tests.agents.samples import GOOD_MODULE

MAX_PROMPT_CHARS = 9000  # system + user; a small local model's context holds it with room to answer
EXPECTED_SECTIONS = {
    "exploit": ["# Task", "# Environment", "# Reflection after generation 1", "# Elite to refine: 1-0 (fitness -20)",
                "# Tips", "# Feedback from the researcher", "# What to write"],
    "explore": ["# Task", "# Environment", "# Reflection after generation 1", "# Elites so far (best first)",
                "# Tips", "# Feedback from the researcher", "# What to write"],
}


def stats(*values: float) -> dict:
    return {"snapshots": list(values), "max": max(values), "mean": sum(values) / len(values), "min": min(values)}


def record(candidate_id: str, fitness: float | None, status: str = "ok") -> dict:
    components = {"team": stats(*[-40.0 + i for i in range(10)]), "own": stats(*[-4.0 + 0.1 * i for i in range(10)]),
                  "return": stats(*[-60.0 + 2 * i for i in range(10)]), "coverage": stats(*[0.0] * 10)}
    return {"candidate_id": candidate_id, "generation": int(candidate_id[0]), "status": status, "fitness": fitness,
            "fitness_std": 0.5, "per_seed": [{"seed": 0}], "eval": {"return": fitness or 0.0, "coverage": 0.02,
            "occupied": 1.1, "collisions": 3.0}, "reflection_stats": components if fitness is not None else {}}


@pytest.fixture(scope="module")
def prompts() -> dict[str, str]:
    task = problem(RunSpec())
    elite_records = [record("1-0", -20.0), record("0-2", -24.0)]
    elites = [Elite(r["candidate_id"], GOOD_MODULE, r["fitness"], r["eval"], r["reflection_stats"],
                    candidate_feedback(r, task.task_spec)) for r in elite_records]
    others = [record("1-1", -30.0), record("1-2", -35.0)]
    dropped = [{"candidate_id": "1-3", "status": "code_error", "error": "KeyError: 'landmark_positions'"}]
    baseline = {"candidate_id": "baseline", "fitness": -28.0, "eval": {"return": -28.0, "coverage": 0.0}}
    reflection = generation_reflection(1, [*elite_records[:1], *others], elite_records, baseline, dropped, task.task_spec)
    feedback = "PREFER SPREADING OUT\nfewer collisions please"
    designer = Designer(model=None, temperature=0.7)  # type: ignore[arg-type]  # only renders
    texts = {}
    for kind, refine in (("exploit", elites[0]), ("explore", None)):
        messages = designer.design_prompt(task, elites, reflection, feedback, refine, 1).messages
        texts[kind] = "\n".join(m.content for m in messages)
        texts[f"{kind}_user"] = messages[1].content
    return texts


@pytest.mark.parametrize("kind", ["exploit", "explore"])
def test_generation_two_prompt_has_every_section_once_within_the_size_bound(prompts, kind):
    user = prompts[f"{kind}_user"]
    headings = [line for line in user.splitlines() if re.match(r"# \S", line)]
    assert headings == EXPECTED_SECTIONS[kind]
    for once in ("PREFER SPREADING OUT", "fewer collisions please", "Baseline", "Candidate 1-1",
                 "1-3: code_error", "If one component is orders of magnitude larger"):
        assert user.count(once) == 1, once
    assert len(prompts[kind]) <= MAX_PROMPT_CHARS, len(prompts[kind])


def test_only_the_exploit_prompt_carries_the_elites_code_and_statistics(prompts):
    assert prompts["exploit_user"].count("def hybrid_reward") == 1
    assert prompts["exploit_user"].count("Candidate 1-0 (status ok)") == 1  # the elite's statistics
    assert "def hybrid_reward" not in prompts["explore_user"]
    assert "Candidate 1-0" not in prompts["explore_user"] and "- 1-0: fitness -20" in prompts["explore_user"]
