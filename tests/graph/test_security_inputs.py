"""Bad input fails closed, in one line, with nothing written: sizes, answers, damaged runs."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from lero.app.study import StudySpec
from lero.graph.configuration import RunError, RunSpec
from lero.graph.nodes import normalize_answer
from tests.app.test_ui_app import TOKEN, client  # noqa: F401 (the fixture ui builds on)
from tests.support.cli import lero, run_files

# ---------------------------------------------------------------- bounds


@pytest.mark.parametrize(
    ("values", "needle"),
    [
        ({"env_kwargs": {"N": 1_000_000}}, "N must be <= 64"),
        ({"env_kwargs": {"N": 3, "max_cycles": 10**9}}, "max_cycles must be <= 10000"),
        ({"env": "simple_reference", "env_kwargs": {"max_cycles": 10**9}}, "max_cycles must be <= 10000"),
        ({"env_kwargs": {"colour": 1}}, "unknown argument(s) colour"),
        ({"steps": 10**9}, "steps: Input should be less than or equal to 100000000"),
        ({"eval_episodes": 10**6}, "eval_episodes: Input should be less than or equal to 8192"),
        ({"seeds": 1000}, "seeds: Input should be less than or equal to 32"),
        ({"env": "subprocess:run"}, "standard-library module"),
        ({"env": "tests.graph.test_custom_env_loop:make_rendezvous", "env_kwargs": {"import_root": "/tmp"}},
         "import_root is not an env argument"),
    ],
)
def test_run_spec_bounds_are_one_line_errors(values: dict, needle: str) -> None:
    with pytest.raises(RunError) as error:
        RunSpec.parse(values)
    assert needle in str(error.value) and "\n" not in str(error.value)


def test_bounds_leave_room_for_real_studies() -> None:
    """20 seeds, 10x the default evaluation episodes and 10x the default steps."""
    default = RunSpec()
    spec = RunSpec.parse({"seeds": 20, "eval_episodes": 10 * default.eval_episodes, "steps": 10 * default.steps,
                          "env_kwargs": {"N": 10, "num_agent_neighbors": 9}})
    assert spec.seeds == 20
    assert StudySpec.parse({"run_id": "r", "seeds": 20, "steps": 10 * default.steps,
                            "eval_episodes": 10 * default.eval_episodes}).seeds == 20
    with pytest.raises(RunError, match="steps"):
        StudySpec.parse({"run_id": "r", "steps": 10**9})


def test_a_huge_env_argument_is_refused_at_once(tmp_path: Path, monkeypatch, capsys) -> None:
    monkeypatch.chdir(tmp_path)
    code, _, err = lero(["run", "--env-arg", "N=1000000", "--llm", "offline", "--sandbox", "process"], capsys)
    assert code == 2 and "simple_spread: N must be <= 64, got 1000000" in err and err.count("\n") == 1, err
    assert not (tmp_path / "runs").exists()


def test_a_stored_spec_is_checked_like_the_cli(tmp_path: Path, monkeypatch, capsys) -> None:
    monkeypatch.chdir(tmp_path)
    run = tmp_path / "runs" / "big"
    run.mkdir(parents=True)
    (run / "spec.json").write_text(json.dumps({"run_id": "big", "env_kwargs": {"N": 1_000_000}}))
    (run / "state.json").write_text(json.dumps({"status": "interrupted"}))
    before = run_files(run)
    code, _, err = lero(["resume", "big"], capsys)
    assert code == 2 and "N must be <= 64" in err and err.count("\n") == 1
    assert run_files(run) == before


# ---------------------------------------------------------------- gates


PAYLOAD = {"kind": "candidates", "candidates": [{"candidate_id": "0-0"}, {"candidate_id": "0-1"}]}


def test_decisions_for_unknown_candidates_are_errors() -> None:
    with pytest.raises(RunError, match=r"unknown candidate id\(s\) 9-9: this question asks about 0-0, 0-1"):
        normalize_answer("candidates", {"decisions": {"9-9": "reject"}}, PAYLOAD)
    with pytest.raises(RunError, match="unknown candidate id"):  # no question at hand: nothing is known
        normalize_answer("candidates", {"decisions": {"0-0": "reject"}})
    answer = normalize_answer("candidates", {"decisions": {"0-0": {"action": "reject", "extra": [1]}}}, PAYLOAD)
    assert answer == {"decisions": {"0-0": {"action": "reject"}}, "default": "approve"}  # only the schema's keys


@pytest.fixture
def ui(client):  # noqa: F811 (test_ui_app's fixture, imported above)
    """test_ui_app's client on its waiting run, with the answer form's csrf and ts fields."""
    home = client.get(f"/?token={TOKEN}")
    client.csrf = re.search(r'name="csrf" value="([0-9a-f]+)"', home.text).group(1)
    client.ts = re.search(r'name="ts" value="([^"]+)"', client.get("/runs/r1").text).group(1)
    return client


@pytest.mark.parametrize(
    ("fields", "needle"),
    [
        ({}, "no action for candidate(s) 0-0"),
        ({"action:0-0": "approve", "action:9-9": "reject"}, "unknown candidate id(s) 9-9"),
    ],
)
def test_a_ui_answer_without_actions_or_with_unknown_ids_approves_nothing(ui, fields: dict, needle: str) -> None:
    page = ui.post("/runs/r1/answer", data={"csrf": ui.csrf, "ts": ui.ts, **fields})
    assert page.status_code == 400 and needle in page.text
    assert ui.app.state.workers.get("r1") is None  # no worker resumed the run


# ---------------------------------------------------------------- damaged runs and answers


@pytest.fixture
def waiting(tmp_path: Path, monkeypatch, capsys) -> Path:
    """A real run of the default env waiting at its spec approval."""
    monkeypatch.chdir(tmp_path)
    code, out, err = lero(["run", "--approve", "spec", "--llm", "offline", "--sandbox", "process",
                              "--run-id", "w", "--generations", "1", "--population", "1"], capsys)
    assert code == 3, out + err
    return tmp_path / "runs" / "w"


def test_bad_answers_are_one_line_errors_and_write_nothing(waiting: Path, capsys) -> None:
    before = run_files(waiting)
    deep = waiting.parent.parent / "deep.json"
    deep.write_text("[" * 200_000 + "]" * 200_000)
    bad = waiting.parent.parent / "bad.json"
    bad.write_text(json.dumps({"action": "maybe"}))
    for answer, needle in ((deep, "is nested too deeply"), (bad, "spec answer action must be one of approve")):
        code, _, err = lero(["resume", "w", "--answer", str(answer), "--max-llm-requests", "9"], capsys)
        assert code == 2 and needle in err and err.count("\n") == 1, err
    assert run_files(waiting) == before  # no run_resumed event, spec.json as it was


def test_a_corrupt_checkpoint_file_is_one_line(waiting: Path, capsys) -> None:
    (waiting / "checkpoints.sqlite").write_bytes(b"not a database" * 100)
    before = run_files(waiting)
    code, _, err = lero(["resume", "w"], capsys)
    assert code == 2 and "cannot read checkpoints.sqlite" in err and err.count("\n") == 1, err
    assert run_files(waiting) == before


def test_sandbox_build_without_a_daemon_is_one_line(monkeypatch, capsys) -> None:
    from lero.sandbox import SandboxUnavailable, image

    def no_daemon(*args, **kwargs):
        raise SandboxUnavailable("no Docker daemon answers: start Docker")

    monkeypatch.setattr(image, "build_image", no_daemon)
    code, _, err = lero(["sandbox", "build"], capsys)
    assert (code, err) == (1, "lero: error: no Docker daemon answers: start Docker\n")
