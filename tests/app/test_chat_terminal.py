"""`lero chat --llm offline` in a pseudo-terminal, as a person types it in a fresh working
directory: each answer is checked as it is typed (a bad one is asked again at that field,
the form goes on), `none` is taken for approvals, and declining keeps the spec as a file
with the `lero run` command that starts it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lero.app.cli.args import build_parser, spec_fields
from lero.graph.configuration import RunSpec
from tests.support.terminal import Terminal


def answer(term: Terminal, at: int, steps: list[tuple[str, str | None]]) -> int:
    """Wait for each prompt in turn (after AT) and type its answer (None: only wait); the end."""
    for pattern, reply in steps:
        at = term.expect(pattern, at)
        if reply is not None:
            term.send(reply)
    return at


@pytest.mark.slow
def test_offline_chat_checks_each_answer_takes_none_and_keeps_a_declined_spec(tmp_path: Path) -> None:
    (tmp_path / "lero-spec.json").write_text("{}\n")  # the person's own file: kept as it is
    term = Terminal(["chat", "--llm", "offline"], tmp_path)
    at = answer(term, 0, [
        (r"environment \[", ""), (r"env argument N \(3\): ", "five"),
        (r"N takes a whole number \(default 3\), got 'five'", None),
        (r"env argument N \(3\): ", "4"),  # asked again at that field, not from the start
        (r"env argument num_agent_neighbors \(1\): ", ""), (r"env argument num_landmark_neighbors \(2\): ", ""),
        (r"other env arguments", "local_ratio"), (r"expected KEY=VALUE, got local_ratio", None),
        (r"other env arguments", ""), (r"algorithm \[", "vdn"), (r"generations \(\d+\): ", "1"),
        (r"candidates per generation \(\d+\): ", "1"), (r"env steps per candidate", "2k"),
        (r"seeds per candidate \(\d+\): ", "1"), (r"ask for approval of \[none/", "none"),
        (r"Start this experiment\?", "n"),
    ])
    assert term.text.count("environment [") == 1  # the form never restarted
    answer(term, at, [(r"start it later with: lero run --config \S*lero-spec-2\.json", None),
                      (r"Design it again\?", "n"), ("no experiment started", None)])
    assert term.wait() == 0

    assert (tmp_path / "lero-spec.json").read_text() == "{}\n"
    saved = tmp_path / "lero-spec-2.json"
    args = build_parser().parse_args(["run", "--config", str(saved)])
    spec = RunSpec.parse(spec_fields(args))
    assert spec.env_kwargs["N"] == 4 and (spec.algo, spec.steps, spec.approve) == ("vdn", 2000, "none")
    assert json.loads(saved.read_text())["approve"] == "none"
    assert not (tmp_path / "runs").exists()  # nothing started
