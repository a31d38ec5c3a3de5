"""RichUI: stream events render, interrupts are answered from an injected input stream
(app.console.approvals, usable without the progress display)."""

from __future__ import annotations

import io
import sys
from pathlib import Path

import pytest
from rich.console import Console

from lero.app.console.approvals import Approvals, Asker, describe_answer
from lero.app.console.progress import RichUI, train_progress

CODE = "import torch\n\ndef hybrid_reward(ctx):\n    return ctx.env_reward, {}\n"


def make_ui(answers: str, **kwargs: object) -> tuple[RichUI, io.StringIO]:
    out = io.StringIO()
    ui = RichUI(
        console=Console(file=out, width=160),
        stdin=io.StringIO(answers),
        interactive=True,
        **kwargs,
    )
    return ui, out


SPEC_PAYLOAD = {
    "kind": "spec",
    "run_id": "r1",
    "spec": {"env": "simple_spread", "env_kwargs": {"N": 3}, "generations": 2},
    "question": "Start this run?",
    "answers": ["approve", "reject"],
}
CANDIDATES_PAYLOAD = {
    "kind": "candidates",
    "generation": 0,
    "question": "Train these candidates?",
    "candidates": [
        {"candidate_id": f"0-{i}", "code": CODE, "origin": "offline",
         "review": {"verdict": "accept", "points": [f"point {i}"], "text": ""}}
        for i in range(4)
    ],
}  # fmt: skip
GENERATION_PAYLOAD = {
    "kind": "generation",
    "generation": 0,
    "best": {"candidate_id": "0-1", "fitness": -20.5},
    "baseline_fitness": -25.0,
    "candidates": [{"candidate_id": "0-1", "status": "ok", "fitness": -20.5}],
    "reflection": "dist term dominated the reward",
    "question": "Run the next generation?",
}


def test_no_terminal_returns_none() -> None:
    ui = RichUI(console=Console(file=io.StringIO()), stdin=io.StringIO(""), interactive=False)
    for payload in (SPEC_PAYLOAD, CANDIDATES_PAYLOAD, GENERATION_PAYLOAD):
        assert ui.ask(payload) is None


@pytest.mark.parametrize(
    ("typed", "action"), [("y\n", "approve"), ("n\n", "reject"), ("\n", "approve")]
)
def test_spec_confirm(typed: str, action: str) -> None:
    ui, out = make_ui(typed)
    with ui:
        assert ui.ask(SPEC_PAYLOAD) == {"action": action}
    assert "simple_spread" in out.getvalue() and '{"N": 3}' in out.getvalue()


def test_candidates_approve_reject_comment_edit(tmp_path: Path) -> None:
    editor = tmp_path / "editor.py"
    editor.write_text(
        "import sys, pathlib\n"
        "p = pathlib.Path(sys.argv[1])\n"
        "p.write_text(p.read_text() + '# edited by a human\\n')\n"
    )
    ui, out = make_ui(
        "approve\nreject\ncode\ncomment\n\ncomment\npenalise collisions harder\nedit\n",
        editor=f"{sys.executable} {editor}",
    )
    with ui:
        answer = ui.ask(CANDIDATES_PAYLOAD)
    assert answer == {
        "decisions": {
            "0-0": {"action": "approve"},
            "0-1": {"action": "reject"},
            "0-2": {"action": "comment", "comment": "penalise collisions harder"},
            "0-3": {"action": "edit", "code": CODE + "# edited by a human\n"},
        },
        "default": "approve",
    }
    text = out.getvalue()
    assert "point 3" in text and "critic: accept" in text and "(2 of 4)" in text
    assert text.count("def hybrid_reward") == 1  # the whole module only where `code` asked for it
    assert text.index("def hybrid_reward") > text.index("candidate 0-2 (3 of 4)")


PARENT = (
    "import torch\n\n\ndef hybrid_reward(ctx):\n    near = -ctx.obs[..., 0]\n"
    + "".join(f"    # line {i}\n" for i in range(60))
    + "    return ctx.env_reward + 0.1 * near, {'near': near}\n\n\ndef enhance_observation(obs):\n"
    "    return torch.cat([obs, obs[:, :1] * 2], dim=1)\n"
)
CHILD = PARENT.replace("0.1 * near, {'near': near}", "0.3 * near - 0.2 * crowd, {'near': near, 'crowd': crowd}").replace(
    "    near = -ctx.obs[..., 0]\n", "    near = -ctx.obs[..., 0]\n    crowd = ctx.obs[..., 1]\n")


def test_a_revision_shows_its_diff_terms_and_features_not_the_whole_module() -> None:
    child = {"candidate_id": "1-0", "code": CHILD, "origin": "designer", "kind": "exploit", "parents": ["0-2"],
             "parent_code": PARENT, "review": {"verdict": "accept", "points": ["scale ok"], "text": ""}}  # fmt: skip
    ui, out = make_ui("approve\n")
    with ui:
        assert ui.ask({**CANDIDATES_PAYLOAD, "candidates": [child]})["decisions"]["1-0"] == {"action": "approve"}
    text = out.getvalue()
    assert "candidate 1-0 (1 of 1): exploit of 0-2" in text and "diff against 0-2" in text
    assert "reward terms: near, crowd" in text and "features: obs[:, :1] * 2" in text
    assert "+    crowd = ctx.obs[..., 1]" in text and "# line 30" not in text  # a diff, not 66 lines
    assert "scale ok" in text


def test_an_edit_the_gate_refused_is_shown_with_its_reason_and_reopens_as_left(tmp_path: Path) -> None:
    seen = tmp_path / "seen.py"
    editor = tmp_path / "editor.py"
    editor.write_text(
        "import sys, pathlib, shutil\n"
        f"shutil.copy(sys.argv[1], {str(seen)!r})\n"
        "p = pathlib.Path(sys.argv[1])\n"
        "p.write_text(p.read_text().replace('def hybrid_reward(ctx:', 'def hybrid_reward(ctx):'))\n"
    )
    broken = CODE.replace("def hybrid_reward(ctx):", "def hybrid_reward(ctx:")
    refused = {**CANDIDATES_PAYLOAD["candidates"][0], "note": "the edit was stopped by the gate:\nsyntax error",
               "refused_edit": {"code": broken, "reason": "static checks failed: syntax error line 3"}}  # fmt: skip
    ui, out = make_ui("edit\n", editor=f"{sys.executable} {editor}")
    with ui:
        answer = ui.ask({**CANDIDATES_PAYLOAD, "candidates": [refused]})
    text = " ".join(out.getvalue().split())
    assert "your edit was NOT trained: the gate stopped it" in text
    assert "static checks failed: syntax error line 3" in text
    assert seen.read_text() == broken  # the person's text, not the code before the edit
    assert answer["decisions"]["0-0"] == {"action": "edit", "code": CODE}


def test_failing_editor_is_reported_and_the_decision_asked_again(tmp_path: Path) -> None:
    ui, out = make_ui("edit\nreject\n", editor=f"{sys.executable} -c 'raise SystemExit(3)'")
    with ui:
        answer = ui.ask({**CANDIDATES_PAYLOAD, "candidates": CANDIDATES_PAYLOAD["candidates"][:1]})
    assert answer == {"decisions": {"0-0": {"action": "reject"}}, "default": "approve"}
    assert "edit failed" in out.getvalue() and "exited with status 3" in out.getvalue()


def test_generation_continue_with_feedback_and_stop() -> None:
    ui, out = make_ui("continue\nfocus on collisions\nstop\n")
    with ui:
        assert ui.ask(GENERATION_PAYLOAD) == {
            "action": "continue",
            "feedback": "focus on collisions",
        }
        assert ui.ask(GENERATION_PAYLOAD) == {"action": "stop", "feedback": None}
    assert "dist term dominated" in out.getvalue() and "-25.000" in out.getvalue()


def test_input_ending_at_a_prompt_leaves_the_question_pending() -> None:
    ui, _ = make_ui("approve\n")  # one answer for four candidates
    with ui:
        assert ui.ask(CANDIDATES_PAYLOAD) is None


def test_bad_choice_is_asked_again() -> None:
    ui, out = make_ui("maybe\nst\n")
    with ui:
        assert ui.ask(GENERATION_PAYLOAD) == {"action": "stop", "feedback": None}
    assert "choose one of continue, stop" in out.getvalue()


def test_approvals_answer_without_a_progress_display() -> None:
    """The approval screens stand alone: no RichUI, no progress bars, input ending raises."""
    out = io.StringIO()
    approvals = Approvals(Asker(Console(file=out, width=160), io.StringIO("continue\nmore reach\nn\n")))
    assert approvals.answer(GENERATION_PAYLOAD) == {"action": "continue", "feedback": "more reach"}
    assert approvals.answer(SPEC_PAYLOAD) == {"action": "reject"}
    with pytest.raises(EOFError):
        approvals.answer(SPEC_PAYLOAD)
    assert "dist term dominated" in out.getvalue()


def test_unknown_interrupt_kind() -> None:
    ui, _ = make_ui("")
    with pytest.raises(ValueError, match="unknown interrupt kind 'quiz'"):
        ui.ask({"kind": "quiz"})


def test_events_render() -> None:
    """Events as graph.context streams them: `type` plus the events.jsonl record."""
    ui, out = make_ui("", generations=2)
    events = [
        {"type": "log", "event": "run_started", "ts": 1.0, "run_id": "r1"},
        {"type": "generation", "event": "generation_started", "ts": 1.0, "generation": 0},
        {"type": "llm", "event": "llm_call", "ts": 1.0, "role": "designer", "status": "ok",
         "prompt_tokens": 100, "completion_tokens": 50},
        {"type": "llm", "event": "llm_call", "ts": 1.0, "role": "critic", "status": "error",
         "error": "HTTP 500: boom"},
        {"type": "llm", "event": "llm_call", "ts": 1.0, "role": "probe", "status": "error",
         "error": "HTTP 500: Input should be 'text' or 'json_object', input: json_schema"},
        {"type": "candidate", "event": "candidate", "ts": 1.0, "candidate_id": "0-0",
         "generation": 0, "stage": "validate", "status": None, "origin": "designer"},
        {"type": "job", "event": "job_started", "ts": 1.0, "job_id": "j1", "kind": "validate",
         "candidate_id": "0-0"},
        {"type": "job", "event": "job_finished", "ts": 1.0, "job_id": "j1", "kind": "validate",
         "candidate_id": "0-0", "status": "code_error", "cached": False},
        {"type": "job", "event": "train_started", "ts": 1.0, "kind": "train",
         "candidate_id": "0-0", "generation": 0, "seed": 1},
        {"type": "train_progress", "event": "train_progress", "ts": 1.0, "candidate_id": "0-0",
         "seed": 1, "done": 500, "total": 1000, "return": -30.0},
        {"type": "job", "event": "train_finished", "ts": 1.0, "kind": "train",
         "candidate_id": "0-0", "generation": 0, "seed": 1, "status": "ok", "cached": True,
         "fitness": -21.25},
        {"type": "generation", "event": "generation_finished", "ts": 1.0, "generation": 0,
         "best_fitness": -21.25, "valid": 1},
        {"type": "interrupt", "kind": "generation", "payload": {}},
        {"type": "log", "event": "reflection", "ts": 1.0, "generation": 0, "chars": 812},
        {"type": "log", "event": "log", "ts": 1.0, "message": "designer stopped: budget"},
        {"type": "something_new"},
    ]  # fmt: skip
    with ui:
        for event in events:
            ui.on_event(event)
        assert set(ui.bars) == {"generations", "llm"}  # finished jobs' bars are gone
        generations_bar = ui.progress.tasks[ui.bars["generations"]]
        assert (generations_bar.completed, generations_bar.total) == (1, 2)
        assert ui.llm_tokens == 150
    text = out.getvalue()
    assert "generation 0 done: 1 valid, best fitness -21.250" in text
    assert "candidate 0-0 (designer): validate" in text
    assert "sandbox validate 0-0: code_error" in text
    assert "train 0-0 seed 1: ok (cached) fitness -21.250" in text
    assert "LLM critic request failed: HTTP 500: boom" in text
    assert "json_schema" not in text  # the server's refusal of a probe is its answer, not a failure
    assert "waiting for approval: generation" in text
    assert "reflection" not in text and "run_started" not in text  # records stay in events.jsonl
    assert "designer stopped: budget" in text


def task(ui: RichUI, key: str):
    """The progress task behind a bar (ids, not positions: bars come and go)."""
    return next(t for t in ui.progress.tasks if t.id == ui.bars[key])


def test_one_bar_per_running_job_a_queued_count_and_a_run_eta_on_measured_steps() -> None:
    """The sandbox's train job is the graph's training task seen from below: no second bar;
    a task without progress yet is counted as queued; the run's bar counts env steps."""
    ui, out = make_ui("", generations=1, env_steps=3000)
    start = {"type": "job", "kind": "train", "candidate_id": "0-0", "generation": 0}
    with ui:
        ui.on_event({"type": "job", "event": "job_started", "job_id": "s1", "kind": "train", "candidate_id": "0-0"})
        assert set(ui.bars) == {"run"}  # the run bar from the start; no bar for the sandbox job
        for seed in (0, 1):
            ui.on_event({**start, "event": "train_started", "seed": seed})
        queued = task(ui, "queued")
        assert queued.description == "2 training job(s) queued for a slot"
        ui.on_event({"type": "train_progress", "candidate_id": "0-0", "seed": 0, "done": 500, "total": 1000})
        ui.on_event({"type": "train_progress", "candidate_id": "0-0", "seed": 0, "done": 800, "total": 1000})
        assert task(ui, "queued").description == "1 training job(s) queued for a slot"
        assert set(ui.bars) == {"queued", "task:0-0:0", "run"}
        run = task(ui, "run")
        assert (run.completed, run.total) == (800, 3000)  # the deltas, not the sum of reports
        ui.on_event({"type": "train_progress", "candidate_id": "0-0", "seed": 1, "done": 200, "total": 1000})
        assert "queued" not in ui.bars and task(ui, "run").completed == 1000
        ui.on_event({"type": "job", "event": "job_finished", "job_id": "s1", "kind": "train",
                     "candidate_id": "0-0", "status": "ok"})  # fmt: skip
        ui.on_event({**start, "event": "train_finished", "seed": 0, "status": "ok", "fitness": -20.0})
    text = out.getvalue()
    assert "train 0-0 seed 0: ok fitness -20.000" in text and "sandbox train" not in text


@pytest.mark.parametrize("payload", [SPEC_PAYLOAD, CANDIDATES_PAYLOAD, GENERATION_PAYLOAD])
def test_describe_answer_shows_valid_json_shapes(payload: dict) -> None:
    text = describe_answer(payload)
    assert payload["question"] in text
    assert '"action"' in text or '"decisions"' in text
    if payload["kind"] == "candidates":
        assert "0-0, 0-1, 0-2, 0-3" in text


def test_progress_before_the_first_finished_episode_has_no_return() -> None:
    """The progress contract allows `return: None` (no episode has finished yet)."""
    ui, _ = make_ui("")
    with ui:
        ui.on_event({"type": "train_progress", "event": "train_progress", "ts": 1.0,
                     "candidate_id": "0-0", "seed": 0, "done": 64, "total": 1000, "return": None})
        bar = ui.progress.tasks[ui.bars["task:0-0:0"]]
        assert (bar.completed, bar.total, bar.fields["note"]) == (64, 1000, "return —")
    console = Console(file=io.StringIO(), width=120)
    with train_progress(console, "qmix on simple_spread") as update:
        update(0, 1000, {"return": None})
        update(500, 1000, {"return": -30.0})
