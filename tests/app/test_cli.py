"""CLI parsing, bad input (one line, exit 2) and the file-only commands (runs, report)."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import pytest
from rich.console import Console

from lero.app.cli.args import build_parser, parse_value, resume_overrides, spec_fields
from lero.app.cli.main import main
from lero.graph.configuration import DISK_BUDGET_MB, RunSpec
from lero.graph.context import llm_config
from lero.graph.runner import RESUME_OVERRIDES
from tests.app.test_report import make_run_dir

REPO = Path(__file__).resolve().parents[2]


def run_main(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    out = io.StringIO()
    code = main(argv, console=Console(file=out, width=200))
    return code, out.getvalue(), capsys.readouterr().err


def assert_usage_error(code: int, err: str, fragment: str) -> None:
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("lero: error: ")
    assert fragment in lines[0]
    assert "Traceback" not in err


@pytest.mark.parametrize(
    ("text", "value"),
    [("5", 5), ("-2", -2), ("0.5", 0.5), ("1e-3", 1e-3), ("true", True), ("False", False),
     ("None", None), ("null", None), ("abc", "abc"), ("", "")],
)  # fmt: skip
def test_parse_value(text: str, value: object) -> None:
    assert parse_value(text) == value
    assert type(parse_value(text)) is type(value)


def test_run_flags_override_config_and_env_args_update_lero_default(tmp_path: Path) -> None:
    config = tmp_path / "exp.toml"
    config.write_text('generations = 5\npopulation = 3\nllm = "offline"\nsteps = 999\n')
    args = build_parser().parse_args(
        ["run", "--config", str(config), "--steps", "2000", "--env-arg", "N=5"]
    )
    fields = spec_fields(args)
    assert fields["generations"] == 5 and fields["population"] == 3
    assert fields["steps"] == 2000  # flag beats the file
    assert fields["env_kwargs"] == {"N": 5, "num_agent_neighbors": 1, "num_landmark_neighbors": 2}


def test_json_config_env_kwargs_are_the_base_for_env_args(tmp_path: Path) -> None:
    config = tmp_path / "exp.json"
    config.write_text(json.dumps({"env_kwargs": {"N": 4}, "seeds": 2}))
    args = build_parser().parse_args(
        ["run", "--config", str(config), "--env-arg", "local_ratio=0.25"]
    )
    assert spec_fields(args) == {"env_kwargs": {"N": 4, "local_ratio": 0.25}, "seeds": 2}


def test_llm_timeout_and_context_tokens_reach_the_spec_and_the_resume_overrides(tmp_path: Path) -> None:
    config = tmp_path / "exp.toml"
    config.write_text("llm_timeout_s = 30\ncontext_tokens = 8192\n")
    args = build_parser().parse_args(["run", "--config", str(config), "--llm-timeout", "900"])
    assert {k: spec_fields(args)[k] for k in ("llm_timeout_s", "context_tokens")} == {
        "llm_timeout_s": 900.0, "context_tokens": 8192}  # the flag beats the file
    spec = RunSpec.parse(spec_fields(build_parser().parse_args(
        ["run", "--llm-timeout", "1.5", "--context-tokens", "2048"])))
    assert (spec.llm_timeout_s, spec.context_tokens) == (1.5, 2048)
    assert llm_config(spec).timeout_s == 1.5 and llm_config(spec).context_tokens == 2048
    overrides = resume_overrides(build_parser().parse_args(
        ["resume", "r", "--llm-timeout", "1200", "--context-tokens", "4096"]))
    assert overrides == {"llm_timeout_s": 1200.0, "context_tokens": 4096}
    assert set(overrides) <= set(RESUME_OVERRIDES)  # resume_run accepts them
    assert resume_overrides(build_parser().parse_args(["resume", "r"])) == {}
    for command in ("chat", "ui"):
        args = build_parser().parse_args([command, "--llm-timeout", "60", "--context-tokens", "256"])
        assert (args.llm_timeout_s, args.context_tokens) == (60.0, 256)


def test_the_disk_budget_reaches_the_spec() -> None:
    assert RunSpec.parse(spec_fields(build_parser().parse_args(["run"]))).disk_budget_mb == DISK_BUDGET_MB
    args = build_parser().parse_args(["run", "--disk-budget-mb", "512.5"])
    assert RunSpec.parse(spec_fields(args)).disk_budget_mb == 512.5


def test_schedule_reaches_the_spec_and_a_config_file_may_set_it(tmp_path: Path) -> None:
    assert RunSpec.parse(spec_fields(build_parser().parse_args(["run"]))).schedule == "full"
    assert RunSpec.parse(spec_fields(build_parser().parse_args(["run", "--schedule", "halving"]))).schedule == "halving"
    config = tmp_path / "exp.toml"
    config.write_text('schedule = "halving"\n')
    assert spec_fields(build_parser().parse_args(["run", "--config", str(config)]))["schedule"] == "halving"


@pytest.mark.parametrize(
    ("argv", "fragment"),
    [
        (["run", "--llm-timeout", "0"], "--llm-timeout: must be > 0"),
        (["run", "--job-timeout", "0"], "--job-timeout: must be > 0"),
        (["run", "--job-timeout", "100000"], "job_timeout_s"),
        (["run", "--disk-budget-mb", "0"], "--disk-budget-mb: must be > 0"),
        (["run", "--llm-timeout", "soon"], "a positive number"),
        (["resume", "r", "--llm-timeout", "-5"], "must be > 0"),
        (["run", "--context-tokens", "255"], "--context-tokens: must be >= 256"),
        (["chat", "--context-tokens", "2k"], "expected an integer"),
        (["ui", "--context-tokens", "100"], "must be >= 256"),
        (["run", "--generations", "0"], "--generations"),
        (["run", "--steps", "lots"], "positive integer"),
        (["run", "--approve", "maybe"], "--approve"),
        (["run", "--schedule", "thirds"], "--schedule: invalid choice"),
        (["run", "--env-arg", "N5"], "KEY=VALUE"),
        (["run", "--config", "/nonexistent/exp.toml"], "config file not found"),
        (["train", "--env", "simple_spread", "--algo", "mappo", "--steps", "0", "--seed", "0",
          "--out", "x"], "must be > 0"),
        (["train", "--env", "simple_spread", "--algo", "mappo", "--steps", "1e9x", "--seed", "0",
          "--out", "x"], "positive integer"),
        (["train", "--env", "simple_spread"], "required"),
        (["frobnicate"], "invalid choice"),
        (["sandbox", "frob"], "invalid choice"),
        (["bench", "--seconds", "0"], "must be > 0"),
        (["bench", "--env-arg", "N=0", "--skip-train"], "N must be >= 1"),
        ([], "required"),
    ],
)  # fmt: skip
def test_bad_input_is_one_line_exit_2(
    argv: list[str], fragment: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run_main(argv, capsys)
    assert_usage_error(code, err, fragment)


def test_bad_config_syntax(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "exp.toml"
    config.write_text("generations = = 3\n")
    code, _, err = run_main(["run", "--config", str(config)], capsys)
    assert_usage_error(code, err, "cannot parse config")


def test_chat_with_openai_but_no_server_or_key(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    code, _, err = run_main(["chat", "--llm", "openai:gpt-x"], capsys)
    assert_usage_error(code, err, "needs OPENAI_API_KEY or --base-url")


def test_report_of_a_directory_that_is_not_a_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "junk").mkdir()
    code, _, err = run_main(["report", "junk", "--runs-dir", str(tmp_path)], capsys)
    assert_usage_error(code, err, "not a lero run directory")


def test_runs_lists_runs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    make_run_dir(tmp_path, "run-a")
    make_run_dir(tmp_path, "run-b", status="interrupted")
    (tmp_path / "not-a-run").mkdir()
    code, out, _ = run_main(["runs", "--runs-dir", str(tmp_path)], capsys)
    assert code == 0
    lines = [line for line in out.splitlines() if "run-" in line]
    assert len(lines) == 2
    assert lines[0].split()[:8] == ["run-a", "completed", "2/2", "simple_spread", "mappo", "1k", "-", "-24.000"]
    assert "-24.000" in lines[0]
    assert "interrupted" in lines[1]
    assert "not-a-run" not in out


def test_runs_at_80_columns_keeps_the_id_whole_and_flags_a_waiting_run(tmp_path: Path) -> None:
    """The same numbers as the web UI's list and report.md (app.reports.run_status), the run id whole."""
    from lero.app.reports.run_report import write_report
    from lero.app.ui.views import list_runs
    from lero.graph.rundir import RunDir

    long_id = "20261204-061500-a1b2c3"  # the shape RunSpec.with_run_id gives
    waiting = make_run_dir(tmp_path, long_id, status="interrupted")
    RunDir(waiting).append_event("interrupt", kind="candidates", payload={"kind": "candidates", "generation": 1})
    make_run_dir(tmp_path, "20261204-061400-d4e5f6")
    out = io.StringIO()
    assert main(["runs", "--runs-dir", str(tmp_path)], console=Console(file=out, width=80)) == 0
    text = out.getvalue()
    assert long_id in text and max(map(len, text.splitlines())) <= 80
    # no word broken mid-word ("complet/ed"), the numbers whole, the loop's labelled as such
    done = next(line for line in text.splitlines() if line.startswith("20261204-061400-d4e5f6"))
    assert done.split() == ["20261204-061400-d4e5f6", "completed", "2/2", "simple_spre…", "mappo", "1k", "-", "-24.000"]
    assert text.splitlines()[1].split() == ["id", "status", "gens", "env", "algo", "steps", "confirmed", "loop"]
    assert "loop: the loop's best fitness, on the selection episodes" in text
    assert "waiting" in text and "interrupted" not in text
    row = next(r for r in list_runs(tmp_path) if r["run_id"] == long_id)
    assert row["shown"]["shown"] == "waiting for your answer" and row["shown"]["progress"] == "2/2"
    write_report(waiting)
    assert "- status: **waiting for your answer**; generations done: 2/2" in (waiting / "report.md").read_text()


def test_runs_on_empty_dir(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_main(["runs", "--runs-dir", str(tmp_path / "none")], capsys)
    assert code == 0 and "no runs" in out


def test_report_rebuilds_and_summarises(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = make_run_dir(tmp_path, "run-a")
    code, out, _ = run_main(["report", "run-a", "--runs-dir", str(tmp_path)], capsys)
    assert code == 0
    assert (run / "report.json").is_file() and (run / "plots" / "fitness.png").is_file()
    assert str(run / "report.md") in out
    assert "-24.000" in out and "1-0" in out


def test_unknown_run_id(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for command in ("report", "resume"):
        code, _, err = run_main([command, "nope", "--runs-dir", str(tmp_path)], capsys)
        assert_usage_error(code, err, "unknown run id 'nope'")


def test_subprocess_bad_input_has_no_traceback(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "lero.app.cli.main", "report", "ghost", "--runs-dir", str(tmp_path)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2
    assert (
        done.stderr.strip()
        == f"lero: error: unknown run id 'ghost' in {tmp_path}/ (see `lero runs`)"
    )


def test_subprocess_help() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "lero.app.cli.main", "--help"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0
    for command in ("run", "resume", "chat", "runs", "report", "train", "bench", "sandbox"):
        assert command in done.stdout


HEAVY = ("torch", "langchain_core", "langchain_openai", "openai", "langgraph", "vmas")
STARTUP_PROBE = """
import json, sys
from lero.app.cli.args import build_parser
from lero.app.cli.main import main
build_parser()
codes = []
for argv in json.loads(sys.argv[1]):
    try:
        codes.append(main(argv))
    except SystemExit as done:  # --help
        codes.append(done.code)
print(json.dumps({"codes": codes, "heavy": [m for m in json.loads(sys.argv[2]) if m in sys.modules]}))
"""


def test_parsing_help_and_early_errors_import_no_torch_nor_langchain(tmp_path: Path) -> None:
    """Every `lero ...` pays its imports before it parses: the grammar, `--help`, the errors
    said before any work and the runs listing stay off torch, langchain, langgraph and vmas."""
    argvs = [["--help"], ["run", "--help"], ["train", "--help"], ["run", "--popul", "3"],
             ["report", "ghost", "--runs-dir", str(tmp_path)], ["runs", "--runs-dir", str(tmp_path)]]  # fmt: skip
    done = subprocess.run([sys.executable, "-c", STARTUP_PROBE, json.dumps(argvs), json.dumps(HEAVY)],
                          cwd=REPO, capture_output=True, text=True, timeout=120, check=True)  # fmt: skip
    probe = json.loads(done.stdout.splitlines()[-1])
    assert probe == {"codes": [0, 0, 0, 2, 2, 0], "heavy": []}, done.stderr
    assert "unrecognized arguments: --popul 3" in done.stderr and "unknown run id 'ghost'" in done.stderr


def test_the_web_uis_app_imports_no_torch_nor_langchain_before_it_serves() -> None:
    """`lero ui` says where it listens sooner: its pages load the engine when first served."""
    probe = "import json, sys, lero.app.ui.app; print(json.dumps([m for m in json.loads(sys.argv[1]) if m in sys.modules]))"
    done = subprocess.run([sys.executable, "-c", probe, json.dumps(HEAVY)], cwd=REPO, capture_output=True,
                          text=True, timeout=120, check=True)  # fmt: skip
    assert json.loads(done.stdout.splitlines()[-1]) == []


def test_bench_env_throughput_table(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_main(
        ["bench", "--n-envs", "16", "--seconds", "0.3", "--threads", "1", "--skip-train"], capsys
    )
    assert code == 0
    header, _, row = out.strip().splitlines()[-3:]
    assert header.split()[-3:] == ["lero_steps_per_s", "mpe2_steps_per_s", "ratio"]
    assert float(row.split()[-1]) > 0


def test_bench_bad_algo(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run_main(["bench", "--algo", "dqn"], capsys)
    assert_usage_error(code, err, "unknown algo 'dqn'")


@pytest.mark.docker
def test_sandbox_check_reports_every_stage(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_main(["sandbox", "check"], capsys)
    lines = [line for line in out.splitlines() if line.split()[:1] in (["ok"], ["FAIL"])]
    assert lines and lines[0].split()[1] == "daemon:"
    assert code == (0 if all(line.startswith("ok") for line in lines) else 1)


def test_abbreviated_flags_are_refused_before_anything_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    code, _, err = run_main(["run", "--generation", "2", "--popul", "3", "--llm", "offline"], capsys)
    assert_usage_error(code, err, "unrecognized arguments: --generation 2 --popul 3")
    assert not Path("runs").exists()


def _actions(parser) -> list:
    """Every option of every (sub)command."""
    import argparse

    found = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                found += _actions(sub)
        elif not isinstance(action, argparse._HelpAction):
            found.append((parser.prog, action))
    return found


def test_every_flag_has_help_text() -> None:
    bare = [f"{prog} {'/'.join(a.option_strings) or a.dest}" for prog, a in _actions(build_parser()) if not a.help]
    assert bare == []


def test_hparam_overrides_are_checked_and_recorded(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`--hparam KEY=VALUE` for run, train and study: checked against the algorithm's typed
    hyper-parameters (a refused one is one line, exit 2, nothing written), in the run's spec and
    marked in report.md's provenance; `lero train` records it in result.json's config."""
    from lero.app.reports.provenance import provenance_markdown
    from lero.graph.rundir import RunDir
    from tests.app.test_report import CANDIDATE_CODE

    args = build_parser().parse_args(["run", "--algo", "vdn", "--hparam", "lr=0.001", "--hparam", "epochs=2"])
    spec = RunSpec.parse(spec_fields(args))
    assert spec.hparams == {"lr": 0.001, "epochs": 2}
    (tmp_path / "r").mkdir()
    rows = [line for line in provenance_markdown(RunDir(tmp_path / "r"), spec) if line.startswith("| `")]
    assert "| `lr` | 0.001 *set* |" in rows and "| `epochs` | 2 *set* |" in rows and "| `gamma` | 0.9 |" in rows
    (tmp_path / "cand.py").write_text(CANDIDATE_CODE)
    runs = str(tmp_path / "runs")
    for argv, said in ((["run", "--hparam", "lr=abc"], "--hparam: hparam lr must be a number, got 'abc'"),
                       (["run", "--algo", "vdn", "--hparam", "clip_eps=0.1"], "unknown hparams for vdn: clip_eps"),
                       (["train", "--env", "simple_spread", "--algo", "qmix", "--steps", "100", "--seed", "0",
                         "--out", str(tmp_path / "t"), "--hparam", "epochs=-1"], "hparam epochs must be > 0"),
                       (["study", "--candidate", str(tmp_path / "cand.py"), "--algos", "mappo,vdn", "--hparam",
                         "clip_eps=0.1"], "hyper-parameters of vdn: unknown hparams for vdn: clip_eps")):  # fmt: skip
        code, _, err = run_main([*argv, *(["--runs-dir", runs] if argv[0] != "train" else [])], capsys)
        assert code == 2 and said in err and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "t").exists() and not (tmp_path / "runs").exists()
    code, _, err = run_main(["train", "--env", "simple_spread", "--algo", "vdn", "--steps", "200", "--seed", "0",
                             "--n-envs", "8", "--eval-episodes", "2", "--out", str(tmp_path / "t"),
                             "--hparam", "lr=0.0005"], capsys)  # fmt: skip
    assert code == 0, err
    assert json.loads((tmp_path / "t" / "result.json").read_text())["config"]["hparams"] == {"lr": 0.0005}


def test_a_runs_name_and_tags_are_shown_by_runs_compare_legends_and_the_ui(tmp_path: Path, capsys) -> None:
    from lero.app.reports.compare_runs import comparison_figure, comparison_rows, load_runs
    from lero.app.ui.views import list_runs, run_view
    from lero.graph.summary import load_run

    args = build_parser().parse_args(["run", "--name", "lr sweep", "--tag", "ablation", "--tag", "lr"])
    spec = RunSpec.parse(spec_fields(args))
    assert (spec.name, spec.tags) == ("lr sweep", ("ablation", "lr"))
    code, _, err = run_main(["run", "--tag", "two words", "--runs-dir", str(tmp_path / "none")], capsys)
    assert code == 2 and "tag 'two words'" in err and len(err.strip().splitlines()) == 1
    named = make_run_dir(tmp_path, "20261204-061400-d4e5f6")
    stored = json.loads((named / "spec.json").read_text())
    (named / "spec.json").write_text(json.dumps({**stored, "name": "lr sweep [red]", "tags": ["ablation", "lr"]}))
    make_run_dir(tmp_path, "plain")
    short = make_run_dir(tmp_path, "vis")  # a short id: its label line is not cut to the id's width
    (short / "spec.json").write_text(json.dumps({**stored, "run_id": "vis", "name": "quick start", "tags": ["demo"]}))
    out = io.StringIO()
    assert main(["runs", "--runs-dir", str(tmp_path)], console=Console(file=out, width=80)) == 0
    lines = out.getvalue().splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("20261204-061400-d4e5f6"))
    # under its id, as typed (never read as markup), wrapped in the id's column
    assert " ".join(line.strip() for line in lines[at + 1:at + 3]) == "lr sweep [red] #ablation #lr"
    assert max(map(len, lines)) <= 80 and "  quick start #demo" in [line.rstrip() for line in lines]
    rows, _ = comparison_rows(load_runs(tmp_path, ["20261204-061400-d4e5f6", "plain"]))
    assert [row["name"] for row in rows] == ["lr sweep [red] #ablation #lr", None]
    legend = comparison_figure([load_run(named)])["csv"].decode()
    assert "lr sweep [red] #ablation #lr (1-0)" in legend and "20261204-061400-d4e5f6" not in legend
    listed = {row["run_id"]: row["label"] for row in list_runs(tmp_path)}
    assert listed == {"20261204-061400-d4e5f6": "lr sweep [red] #ablation #lr", "plain": "", "vis": "quick start #demo"}
    assert run_view(load_run(named))["label"] == "lr sweep [red] #ablation #lr"
    from starlette.testclient import TestClient

    from lero.agents import LLMConfig
    from lero.app.ui.app import create_app

    app = create_app(str(tmp_path), "t", 8765, LLMConfig.from_spec("offline"), cwd=tmp_path)
    with TestClient(app, base_url="http://127.0.0.1:8765") as client:
        listing = client.get("/?token=t").text
        page = client.get("/runs/20261204-061400-d4e5f6").text
    app.state.workers.close()
    assert '<td class="label">lr sweep [red] #ablation #lr</td>' in listing
    assert '<span id="run-label" class="note">lr sweep [red] #ablation #lr</span>' in page
