"""Report builder on a synthetic run directory laid out as the engine writes it."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from lero.app.reports.run_report import write_report
from lero.graph.rundir import RunDir
from lero.graph.summary import load_run

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
REPORT_KEYS = {
    "run_id", "status", "stop_reason", "baseline", "best", "generations", "lineage", "llm", "env_steps", "wall_s",
    "time", "schedule", "confirmation", "design", "verdicts", "measured",
}  # fmt: skip

CANDIDATE_CODE = """import torch

def hybrid_reward(ctx):
    dist = torch.cdist(ctx.state["agent_pos"], ctx.state["landmark_pos"]).min(-1).values
    return ctx.env_reward - 0.1 * dist, {"dist": dist}

def enhance_observation(obs):
    return torch.cat([obs, obs[:, :2].norm(dim=-1, keepdim=True)], dim=-1)
"""


def _job(fitness: float, seed: int) -> dict:
    return {
        "status": "ok",
        "fitness": fitness,
        "metrics": {"return": fitness, "coverage": 0.1, "occupied": 1.5, "collisions": 0.4},
        "seed": seed,
        "elapsed_s": 3.0,
        "cached": False,
    }


def _result(cid: str | None, gen: int | None, status: str, seeds: list[float]) -> dict:
    curves = {"steps": [0, 500, 1000], "return": [-40.0, -30.0, -25.0 + (seeds[0] if seeds else 0)]}
    fitness = sum(seeds) / len(seeds) if seeds else None
    std = math.sqrt(sum((s - fitness) ** 2 for s in seeds) / len(seeds)) if seeds else None
    return {
        "candidate_id": cid,
        "generation": gen,
        "status": status,
        "fitness": fitness,
        "fitness_std": std,
        "eval": {"return": fitness, "coverage": 0.25, "occupied": 2.0, "collisions": 0.5}
        if seeds
        else {},
        "per_seed": [_job(f, i) for i, f in enumerate(seeds)],
        "curves": curves if seeds else {},
        "reflection_stats": {},
    }


def make_run_dir(root: Path, run_id: str = "run-test", status: str = "completed") -> Path:
    """A two-generation run: one crashed candidate, one rejected by the critic."""
    run = root / run_id
    (run / "baseline").mkdir(parents=True)
    spec = {
        "run_id": run_id, "env": "simple_spread",
        "env_kwargs": {"N": 3, "num_agent_neighbors": 1, "num_landmark_neighbors": 2},
        "algo": "mappo", "generations": 2, "population": 2, "steps": 1000, "seeds": 2,
        "llm": "offline",
    }  # fmt: skip
    (run / "spec.json").write_text(json.dumps(spec))
    state = {
        "status": status, "generation": 2, "started_ts": 1_700_000_000.0, "wall_s": 12.5,
        "env_steps": 10000, "llm": {"requests": 7, "prompt_tokens": 900, "completion_tokens": 300},
    }  # fmt: skip
    (run / "state.json").write_text(json.dumps(state))
    events = [
        {"ts": 1_700_000_000.0, "event": "llm_call", "role": "designer"},
        {"ts": 1_700_000_003.0, "event": "job_finished", "job_id": "j1", "kind": "train",
         "candidate_id": "0-0", "status": "ok", "cached": False},
        {"ts": 1_700_000_004.0, "event": "generation_finished", "generation": 0, "valid": 1},
        {"ts": 1_700_000_008.0, "event": "generation_finished", "generation": 1, "valid": 1},
    ]  # fmt: skip
    (run / "events.jsonl").write_text("\n".join(json.dumps(e) for e in events) + "\n{torn")
    (run / "baseline" / "result.json").write_text(
        json.dumps(_result(None, None, "ok", [-30.0, -32.0]))
    )
    candidates = {
        "0-0": _result("0-0", 0, "ok", [-28.0, -29.0]),
        "0-1": _result("0-1", 0, "code_error", []),
        "1-0": _result("1-0", 1, "ok", [-22.0, -26.0]),
        "1-1": _result("1-1", 1, "rejected_by_critic", []),
    }
    for cid, result in candidates.items():
        cdir = run / "candidates" / cid
        cdir.mkdir(parents=True)
        (cdir / "candidate.py").write_text(f"# candidate {cid}\n{CANDIDATE_CODE}")
        (cdir / "review.md").write_text("VERDICT: accept\n- fine\n")
        (cdir / "result.json").write_text(json.dumps(result))
    return run


HOSTILE_REPLY = "VERDICT: accept <script>alert('lero')</script> | not a column"


def write_llm_records(run: Path) -> list[str]:
    """Requests as a real run keeps them (through RunDir): the designer's (about no
    candidate), a critic's counted by the server, one estimated, a failed one."""
    base = {"model": "smollm2-135m", "n": 1, "attempts": 1, "max_tokens": 512, "window": 2048,
            "window_source": "context_tokens setting"}  # fmt: skip
    records = [
        {**base, "role": "designer", "candidate_id": None, "status": "ok", "prompt_tokens": 1404,
         "completion_tokens": 206, "tokens_estimated": False, "elapsed_s": 21.25,
         "finish_reasons": ["stop", "length"], "shortened": ["env_description"],
         "prompt": [{"role": "system", "content": "You are the designer"}], "replies": ["```python\n```"] * 2},
        {**base, "role": "critic", "candidate_id": "0-0", "status": "ok", "prompt_tokens": 700,
         "completion_tokens": 40, "tokens_estimated": True, "elapsed_s": 3.0, "finish_reasons": ["stop"],
         "shortened": [], "prompt": [{"role": "user", "content": "review <b>this</b>"}],
         "replies": [HOSTILE_REPLY]},
        {**base, "role": "debugger", "candidate_id": "0-1", "status": "error", "attempts": 5,
         "error": "APITimeoutError: Request timed out.", "elapsed_s": 600.0, "shortened": [],
         "prompt": [{"role": "user", "content": "fix it"}]},
    ]  # fmt: skip
    rundir = RunDir(run)
    return [rundir.write_llm_record(record) for record in records]


def test_report_lists_llm_requests_per_candidate(tmp_path: Path) -> None:
    run = make_run_dir(tmp_path)
    names = write_llm_records(run)
    assert names == ["00001-designer.json", "00002-critic.json", "00003-debugger.json"]
    write_report(run)
    md = (run / "report.md").read_text()
    section = md[md.index("## LLM requests"):]
    assert "### designer\n" in section and "### `0-0`\n" in section and "### `0-1`\n" in section
    assert ("| designer | ok | 1404 | 206 | 21.2 | stop, length | env_description "
            "| `llm/00001-designer.json` |") in section
    assert "| critic | ok | 700 (est.) | 40 (est.) | 3.0 | stop | — | `llm/00002-critic.json` |" in section
    assert ("| debugger | error: APITimeoutError: Request timed out. | — | — | 600.0 | — | — "
            "| `llm/00003-debugger.json` |") in section
    assert section.index("### `0-0`") < section.index("00002-critic") < section.index("### `0-1`")
    assert "alert" not in md  # replies stay in llm/, the report holds no model text


def test_report_of_an_offline_run_has_no_llm_requests_section(tmp_path: Path) -> None:
    run = make_run_dir(tmp_path)
    write_report(run)
    assert "LLM requests" not in (run / "report.md").read_text()


def test_report_json_keys_and_values(tmp_path: Path) -> None:
    run = make_run_dir(tmp_path)
    report = write_report(run)
    assert set(report) == REPORT_KEYS
    assert json.loads((run / "report.json").read_text()) == report
    assert report["run_id"] == "run-test"
    assert report["status"] == "completed"
    assert report["baseline"]["fitness"] == pytest.approx(-31.0)
    assert report["baseline"]["eval"]["coverage"] == pytest.approx(0.25)
    best = report["best"]
    assert best["candidate_id"] == "1-0"
    assert best["generation"] == 1
    assert best["fitness"] == pytest.approx(-24.0)
    assert best["code_path"] == "candidates/1-0/candidate.py"
    assert set(best["eval"]) == {"return", "coverage", "occupied", "collisions"}
    assert report["generations"] == [
        {
            "generation": 0,
            "candidates": 2,
            "valid": 1,
            "stopped_early": 0,
            "best_fitness": -28.5,
            "mean_fitness": -28.5,
        },
        {
            "generation": 1,
            "candidates": 2,
            "valid": 1,
            "stopped_early": 0,
            "best_fitness": -24.0,
            "mean_fitness": -24.0,
        },
    ]
    assert report["llm"] == {"requests": 7, "prompt_tokens": 900, "completion_tokens": 300}
    assert report["env_steps"] == 10000
    assert report["wall_s"] == pytest.approx(12.5)


def test_report_markdown_and_plots(tmp_path: Path) -> None:
    run = make_run_dir(tmp_path)
    write_report(run)
    md = (run / "report.md").read_text()
    assert "# candidate 1-0\nimport torch" in md  # the best candidate's code is embedded
    assert "| 1 | 2 | 1 | -24.000 | -24.000 |" in md
    assert "-31.000 ± 1.000 (2 seeds: -30.000, -32.000)" in md  # baseline spread over seeds
    assert "Improvement over the baseline on the selection episodes: +7.000" in md
    assert "rejected_by_critic" in md
    for name in ("fitness.png", "learning_curves.png"):
        png = run / "plots" / name
        assert png.read_bytes()[:8] == PNG_MAGIC
        assert f"plots/{name}" in md


def test_report_of_unfinished_run_without_state_or_results(tmp_path: Path) -> None:
    run = tmp_path / "early"
    (run / "candidates" / "0-0").mkdir(parents=True)
    (run / "candidates" / "0-0" / "candidate.py").write_text(CANDIDATE_CODE)
    (run / "spec.json").write_text(json.dumps({"run_id": "early"}))
    (run / "events.jsonl").write_text(
        json.dumps({"ts": 10.0, "event": "llm_call", "prompt_tokens": 5, "completion_tokens": 2})
        + "\n"
        + json.dumps({"ts": 14.0, "event": "llm_call", "prompt_tokens": 6, "completion_tokens": 3})
        + "\n"
    )
    report = write_report(run)
    assert report["status"] == "running"
    assert report["best"]["candidate_id"] is None
    assert report["baseline"] == {"fitness": None, "eval": {}}
    assert report["generations"][0]["valid"] == 0
    assert report["llm"] == {"requests": 2, "prompt_tokens": 11, "completion_tokens": 5}
    assert report["wall_s"] == pytest.approx(4.0)
    assert (run / "plots" / "fitness.png").read_bytes()[:8] == PNG_MAGIC
    assert not (run / "plots" / "learning_curves.png").exists()


def test_not_a_run_directory_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="not a lero run directory"):
        load_run(tmp_path)


def test_corrupt_result_json_names_the_file(tmp_path: Path) -> None:
    run = make_run_dir(tmp_path)
    (run / "candidates" / "0-0" / "result.json").write_text("{not json")
    with pytest.raises(ValueError, match=r"0-0.result\.json"):
        write_report(run)


def test_measured_points_keep_only_string_fields_from_the_events() -> None:
    """events.jsonl is read from a run directory: a `measured` event's points are kept only
    as the strings of their declared keys, at most MAX_MEASURED a candidate."""
    from lero.graph.summary import MAX_MEASURED, measured_points

    good = {"target": "term far", "rubric_item": "rewards-penalised", "why": "correlates -0.35"}
    events = [
        {"event": "measured", "candidate_id": "0-0", "points": [good, {**good, "why": 3}, "x", {**good, "extra": 1}],
         "revised": True},
        {"event": "measured", "candidate_id": "0-1", "points": "not a list"},
        {"event": "measured", "candidate_id": 7, "points": [good]},
        {"event": "measured", "candidate_id": "0-2", "points": [good] * (MAX_MEASURED + 5), "revised": "yes"},
    ]
    measured = measured_points(events)
    assert measured["0-0"] == [{**good, "revised": True}, {**good, "revised": True}]
    assert measured["0-1"] == [] and 7 not in measured
    assert len(measured["0-2"]) == MAX_MEASURED and measured["0-2"][0]["revised"] is False
