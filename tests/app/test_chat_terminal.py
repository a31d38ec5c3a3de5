"""`lero chat --llm offline` in a pseudo-terminal, as a person types it in a fresh working
directory: each answer is checked as it is typed (a bad one is asked again at that field,
the form goes on), `none` is taken for approvals, and declining keeps the spec as a file
with the `lero run` command that starts it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lero.app.args import build_parser, spec_fields
from lero.graph.configuration import RunSpec
from tests.support.terminal import Terminal


@pytest.mark.slow
def test_offline_chat_checks_each_answer_takes_none_and_keeps_a_declined_spec(tmp_path: Path) -> None:
    (tmp_path / "lero-spec.json").write_text("{}\n")  # the person's own file: kept as it is
    term = Terminal(["chat", "--llm", "offline"], tmp_path)
    at = term.expect(r"environment \[")
    term.send("")
    at = term.expect(r"env argument N \(3\): ", at)
    term.send("five")
    at = term.expect(r"N takes a whole number \(default 3\), got 'five'", at)
    at = term.expect(r"env argument N \(3\): ", at)  # asked again at that field, not from the start
    term.send("4")
    for _ in range(2):  # num_agent_neighbors, num_landmark_neighbors: their defaults
        at = term.expect(r"env argument \w+ \(\d+\): ", at)
        term.send("")
    at = term.expect(r"other env arguments", at)
    term.send("local_ratio")
    at = term.expect(r"expected KEY=VALUE, got local_ratio", at)
    at = term.expect(r"other env arguments", at)
    term.send("")
    at = term.expect(r"algorithm \[", at)
    term.send("vdn")
    at = term.expect(r"generations \(\d+\): ", at)
    term.send("1")
    at = term.expect(r"candidates per generation \(\d+\): ", at)
    term.send("1")
    at = term.expect(r"env steps per candidate", at)
    term.send("2k")
    at = term.expect(r"seeds per candidate \(\d+\): ", at)
    term.send("1")
    at = term.expect(r"ask for approval of \[none/", at)
    term.send("none")
    at = term.expect(r"Start this experiment\?", at)
    assert term.text.count("environment [") == 1  # the form never restarted
    term.send("n")
    at = term.expect(r"start it later with: lero run --config \S*lero-spec-2\.json", at)
    at = term.expect(r"Design it again\?", at)
    term.send("n")
    term.expect("no experiment started", at)
    assert term.wait() == 0

    assert (tmp_path / "lero-spec.json").read_text() == "{}\n"
    saved = tmp_path / "lero-spec-2.json"
    args = build_parser().parse_args(["run", "--config", str(saved)])
    spec = RunSpec.parse(spec_fields(args))
    assert spec.env_kwargs["N"] == 4 and (spec.algo, spec.steps, spec.approve) == ("vdn", 2000, "none")
    assert json.loads(saved.read_text())["approve"] == "none"
    assert not (tmp_path / "runs").exists()  # nothing started
