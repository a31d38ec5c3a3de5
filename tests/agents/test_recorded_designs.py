"""Real replies of both small models in structured and edit design, kept as test data.

Recorded with `python -m benchmarks.llm_designer --design structured|edit --record DIR`
against llama-cpp-python 0.3.36's server (n_ctx 2048) serving SmolLM2-135M-Instruct and
Gemma 3 270M (base); each folder's `expected.json` says what lero makes of each reply, read
off the reply by a person: a structured design renders and passes the gate, or fails with
its named kind; an edited module passes the gate or breaks its named rules; a critic's
verdict object is read as its verdict, which is `no judgement` for a revise or reject that
names no evidence (the recorded verdicts are all accepts, which need none). The structured replies on simple_reference and
simple_speaker_listener marked `"grammar": "generic"` were answered under the generic
grammar's schema, before those tasks had grammars of their own, and are read under it; the
`grammar-*` ones were answered under the task grammars.
"""

from __future__ import annotations

import functools
import json
import re
from dataclasses import replace
from pathlib import Path

import pytest

from lero.agents.checks import check_candidate, state_names
from lero.agents.critic import parse_structured_review, review_targets
from lero.agents.extract import draft_from_reply
from lero.agents.offline.schema import design_schema
from lero.agents.records import Problem
from lero.agents.structured import design_draft
from lero.graph.configuration import RunSpec
from lero.graph.context import problem
from lero.graph.trust import confirm_env

FIXTURES = Path(__file__).parent / "fixtures"
FOLDERS = ("smollm2-structured", "gemma3-structured", "smollm2-edit", "gemma3-edit")
PETTINGZOO = "tests.graph.test_custom_env_loop:make_rendezvous"


@functools.cache
def task_of(env: str) -> Problem:
    return problem(RunSpec(env=env), confirm_env(env, env) if ":" in env else None)


def handling(folder: str, record: dict) -> str:
    """What lero makes of one recorded reply, in one line."""
    reply, cut_off = record["replies"][0], record["finish_reasons"][0] == "length"
    task = task_of(record["task"])
    if record.get("grammar") == "generic":  # answered under the generic schema
        task = replace(task, task_spec=replace(task.task_spec, grammar=None))
    if record["role"] == "probe":
        return "probe: " + reply.strip()
    if record["role"] == "critic":
        code = reviewed_code(record)
        review = parse_structured_review(reply, review_targets(task, code), code)
        return f"critic: {review.verdict}" + (f"; {review.points[0]}" if review.points else "")
    if folder.endswith("structured") and record["role"] == "designer":
        draft = design_draft(reply, cut_off, design_schema(task), "designer:structured")
    else:
        draft = draft_from_reply(reply, record["role"], cut_off)
    if draft.code is None:
        return (draft.error or "").split(":")[0]
    rules = sorted({v.rule for v in check_candidate(draft.code, state_names(task))})
    return "passes the gate" if not rules else "gate: " + ", ".join(rules)


def reviewed_code(record: dict) -> str:
    """The module a critic's prompt showed (its fenced python block; the design JSON alone when
    none fitted)."""
    prompt = record["prompt"][-1]["content"]
    fenced = re.search(r"```python\n(.*?)```", prompt, re.DOTALL)
    return fenced[1] if fenced else prompt


def records() -> list[tuple[str, str]]:
    return [(folder, name) for folder in FOLDERS if (FIXTURES / folder / "expected.json").exists()
            for name in sorted(json.loads((FIXTURES / folder / "expected.json").read_text()))]


def test_both_models_and_both_modes_were_recorded():
    assert {folder for folder, _ in records()} == set(FOLDERS)
    for folder in FOLDERS:
        names = {p.name for p in (FIXTURES / folder).glob("*.json")} - {"expected.json"}
        assert names == set(json.loads((FIXTURES / folder / "expected.json").read_text())), folder


@pytest.mark.parametrize(("folder", "name"), records())
def test_a_recorded_reply_is_handled_as_a_person_read_it(folder: str, name: str):
    expected = json.loads((FIXTURES / folder / "expected.json").read_text())[name]
    record = json.loads((FIXTURES / folder / name).read_text())
    assert handling(folder, record) == expected
