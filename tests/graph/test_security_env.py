"""Nothing from a run directory, a server's input or an LLM tool imports env code on the host.

The hostile env is a module written here whose mere import writes a marker file, and whose
factory writes another when called; the `subprocess:run` env would run `id` into a third.
Every route that once imported (and called) such an env is driven for real, on loopback:
`lero resume`, the web UI's Resume button, `lero study`, the chat tools, the web UI's start
form and the LangGraph server's input. Installed envs, and envs a person names, still run.
"""

from __future__ import annotations

import io
import json
import re
import uuid
from pathlib import Path

import pytest
from rich.console import Console
from starlette.testclient import TestClient

from lero.agents import LLMConfig
from lero.app.chat.desk import ExperimentDesk
from lero.app.console.approvals import Asker
from lero.app.ui.app import create_app
from lero.graph.configuration import RunError
from tests.support.cli import lero, run_files

TOKEN = "security-token"
GOOD_ENV = "tests.graph.test_custom_env_loop:make_rendezvous"
CANDIDATE = "import torch\n\ndef hybrid_reward(ctx):\n    return ctx.env_reward, {}\n\ndef enhance_observation(obs):\n    return obs\n"


class Hostile:
    """A module in the working directory: importing it, or calling its factory, leaves a marker."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.module = f"hostile_{uuid.uuid4().hex[:8]}"  # never imported before, in any test
        self.env = f"{self.module}:factory"
        self.imported, self.called, self.shell = root / "imported.marker", root / "called.marker", root / "id.marker"
        (root / f"{self.module}.py").write_text(
            "import pathlib\n"
            f"pathlib.Path({str(self.imported)!r}).write_text('imported')\n\n\n"
            "def factory(**kwargs):\n"
            f"    pathlib.Path({str(self.called)!r}).write_text('called')\n"
        )

    def untouched(self) -> bool:
        return not (self.imported.exists() or self.called.exists() or self.shell.exists())

    def stored_run(self, run_id: str = "evil", env: str | None = None, env_kwargs: dict | None = None,
                   with_candidate: bool = False) -> Path:
        """A completed-looking run directory whose spec.json names the hostile env."""
        run = self.root / "runs" / run_id
        run.mkdir(parents=True)
        spec = {"run_id": run_id, "env": env or self.env, "env_kwargs": env_kwargs or {}, "sandbox": "docker",
                "runs_dir": "/elsewhere"}
        (run / "spec.json").write_text(json.dumps(spec))
        (run / "state.json").write_text(json.dumps({"status": "interrupted", "generation": 1}))
        (run / "events.jsonl").write_text("")
        if with_candidate:
            folder = run / "candidates" / "0-0"
            folder.mkdir(parents=True)
            (folder / "candidate.py").write_text(CANDIDATE)
            (folder / "result.json").write_text(json.dumps(
                {"candidate_id": "0-0", "generation": 0, "status": "ok", "fitness": 1.0, "eval": {"return": 1.0},
                 "per_seed": [], "code": CANDIDATE}))
        return run

    def shell_kwargs(self) -> dict:
        return {"args": f"id > {self.shell}", "shell": True}


@pytest.fixture
def hostile(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Hostile:
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))  # importable, were anything to import it
    return Hostile(tmp_path)


# ---------------------------------------------------------------- lero resume / lero study


def test_resume_of_a_hostile_stored_spec_imports_nothing(hostile: Hostile, capsys) -> None:
    run = hostile.stored_run()
    before = run_files(run)
    code, _, err = lero(["resume", "evil"], capsys)
    assert code == 2 and err.count("\n") == 1, err
    assert f"pass --env {hostile.env} to confirm it" in err
    code, _, err = lero(["resume", "evil", "--env", "simple_spread"], capsys)  # must name that env
    assert code == 2 and f"pass --env {hostile.env} to confirm it" in err
    assert hostile.untouched() and run_files(run) == before  # nothing imported, nothing written


def test_resume_of_a_stored_subprocess_run_spec_runs_no_command(hostile: Hostile, capsys) -> None:
    run = hostile.stored_run(env="subprocess:run", env_kwargs=hostile.shell_kwargs())
    for argv in (["resume", "evil"], ["resume", "evil", "--env", "subprocess:run"]):
        code, _, err = lero(argv, capsys)
        assert code == 2 and "subprocess is a standard-library module" in err and err.count("\n") == 1
    assert hostile.untouched() and (run / "events.jsonl").read_text() == ""


def test_study_of_a_hostile_run_imports_nothing(hostile: Hostile, capsys) -> None:
    hostile.stored_run(with_candidate=True)
    code, _, err = lero(["study", "evil", "--sandbox", "process", "--steps", "100"], capsys)
    assert code == 2 and f"pass --env {hostile.env} to confirm it" in err, err
    assert hostile.untouched() and not (hostile.root / "runs" / "evil" / "studies").exists()


# ---------------------------------------------------------------- the web UI


@pytest.fixture
def ui(hostile: Hostile):
    app = create_app("runs", TOKEN, 8765, LLMConfig.from_spec("offline"), cwd=hostile.root)
    with TestClient(app, base_url="http://127.0.0.1:8765") as client:
        home = client.get(f"/?token={TOKEN}")
        client.csrf = re.search(r'name="csrf" value="([0-9a-f]+)"', home.text).group(1)
        yield client
    app.state.workers.close()


def test_ui_resume_button_of_a_hostile_run_imports_nothing(hostile: Hostile, ui) -> None:
    hostile.stored_run()
    answer = ui.post("/runs/evil/resume", data={"csrf": ui.csrf}, follow_redirects=False)
    assert answer.status_code == 303
    worker = ui.app.state.workers.get("evil")
    assert worker.process.wait(timeout=300) == 2
    assert f"pass --env {hostile.env} to confirm it" in worker.error()
    assert hostile.untouched()


@pytest.mark.parametrize("foreign", ["subprocess:run", "reexport"])
def test_ui_start_form_refuses_foreign_factories_uncalled(hostile: Hostile, ui, foreign: str) -> None:
    """The form's env field is typed by the person at the page: it confirms the module (which
    is then imported), but a standard-library or re-exported callable is refused before any call."""
    if foreign == "reexport":
        (hostile.root / "reexport_env.py").write_text("from subprocess import run as factory\n")
        foreign = "reexport_env:factory"
    page = ui.post("/runs", data={"csrf": ui.csrf, "env": foreign, "sandbox": "process", "llm": "offline",
                                  "env_args": f"args=id>{hostile.shell} shell=true"})
    assert page.status_code == 400 and ("standard-library" in page.text or "defined in subprocess" in page.text)
    assert hostile.untouched() and not (hostile.root / "runs").exists()


# ---------------------------------------------------------------- the chat tools


def desk_with(lines: str, runs_dir: Path) -> ExperimentDesk:
    asker = Asker(Console(file=io.StringIO(), width=120), io.StringIO(lines))
    return ExperimentDesk(asker, base={"llm": "offline", "runs_dir": str(runs_dir), "sandbox": "process"})


def test_chat_tools_never_import_an_env_the_llm_named(hostile: Hostile) -> None:
    desk = desk_with("", hostile.root / "runs")  # the user types nothing: input ends
    assert desk.call("set_fields", {"updates": {"env": hostile.env}}).startswith("updated")
    assert "pass --env" in desk.call("describe_environment", {})
    assert "pass --env" in desk.call("estimate_cost", {})
    starter = desk_with("y\n\n", hostile.root / "runs")  # yes, start it; then Enter: no env name typed
    starter.call("set_fields", {"updates": {"env": hostile.env}})
    assert "pass --env" in starter.call("start_run", {})
    wrong = desk_with("simple_spread\n", hostile.root / "runs")  # the user types another name
    wrong.call("set_fields", {"updates": {"env": hostile.env}})
    assert "pass --env" in wrong.call("describe_environment", {})
    assert hostile.untouched()
    refused = desk.call("set_fields", {"updates": {"env": "subprocess:run", "env_kwargs": hostile.shell_kwargs()}})
    assert refused.startswith("not changed") and "standard-library" in refused
    assert hostile.untouched()


def test_a_user_confirms_a_chat_env_by_typing_it(tmp_path: Path) -> None:
    desk = desk_with(f"{GOOD_ENV}\n", tmp_path / "runs")
    desk.call("set_fields", {"updates": {"env": GOOD_ENV}})
    assert "Rendezvous" in desk.call("describe_environment", {})
    assert desk.confirmed is not None and desk.confirmed.name == GOOD_ENV
    typed = desk_with("", tmp_path / "runs")
    assert typed.command(f"/set env={GOOD_ENV}").startswith("updated")  # typed by the user: confirmed
    assert "Rendezvous" in typed.describe_environment()


def test_chat_tools_stay_inside_the_runs_dir(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "spec.json").write_text("{}")
    desk = desk_with("", tmp_path / "runs" / "nested")
    for tool, args in (("show_report", {"run_id": "../.."}), ("run_status", {"run_id": "../../outside"}),
                       ("show_candidate", {"candidate_id": "0-0", "run_id": "../outside"})):
        assert "must be 1-64 characters" in desk.call(tool, args)
    assert "must look like 0-1" in desk.call("show_candidate", {"candidate_id": "../../x", "run_id": "r"})
    moved = desk.call("set_fields", {"updates": {"runs_dir": str(outside)}})
    assert moved == "not changed: runs_dir cannot be changed from the chat"
    assert desk.spec.runs_dir == str(tmp_path / "runs" / "nested")
    assert not (tmp_path / "report.md").exists() and sorted(p.name for p in outside.iterdir()) == ["spec.json"]


# ---------------------------------------------------------------- the LangGraph server's input


def test_langgraph_server_input_imports_nothing_and_stays_in_its_runs_dir(hostile: Hostile) -> None:
    from lero.graph.server import hosted_graph, server_spec

    with pytest.raises(RunError, match="pass --env"):
        server_spec({"spec": {"env": hostile.env, "run_id": "srv1"}}, {})
    with pytest.raises(RunError, match="pass --env"), hosted_graph() as served:  # as the server runs it
        served.invoke({"spec": {"env": hostile.env}}, {"configurable": {"thread_id": "srv2"}})
    with pytest.raises(RunError, match="is not this server's"):
        server_spec({}, {"configurable": {"run_id": "srv3", "thread_id": "srv3",
                                          "runs_dir": str(hostile.root / "elsewhere")}})
    with pytest.raises(RunError, match="standard-library"):
        server_spec({"spec": {"env": "subprocess:run", "env_kwargs": hostile.shell_kwargs(), "run_id": "srv4"}}, {})
    assert hostile.untouched()
    assert not (hostile.root / "runs").exists() and not (hostile.root / "elsewhere").exists()


# ---------------------------------------------------------------- a person's env still runs


def start_waiting(argv: list[str], capsys) -> tuple[int, str]:
    code, out, err = lero(["run", *argv, "--approve", "spec", "--llm", "offline", "--run-id", "w",
                              "--generations", "1", "--population", "1", "--steps", "100"], capsys)
    return code, out + err


def test_a_typed_env_runs_and_a_resume_confirms_it(tmp_path: Path, monkeypatch, capsys) -> None:
    monkeypatch.chdir(tmp_path)
    code, text = start_waiting(["--env", GOOD_ENV, "--sandbox", "process"], capsys)
    assert code == 3, text  # started, waiting for the spec approval
    run = tmp_path / "runs" / "w"
    before = run_files(run)
    code, _, err = lero(["resume", "w"], capsys)
    assert code == 2 and f"pass --env {GOOD_ENV} to confirm it" in err and run_files(run) == before
    code, out, err = lero(["resume", "w", "--env", GOOD_ENV], capsys)
    assert code == 3, out + err
    assert "run_resumed" in (run / "events.jsonl").read_text()


@pytest.mark.docker
def test_an_entry_point_env_resumes_unattended_in_docker(sandbox_image, tmp_path: Path, monkeypatch,
                                                         capsys) -> None:
    import zipfile

    from tests.support.envs import proof_env_source, write_wheel

    wheel = write_wheel(tmp_path, "rendezvous-plugin", {"rendezvous_plugin/__init__.py": proof_env_source()},
                        entry_points="[lero.envs]\nrendezvous = rendezvous_plugin:make_env\n")
    zipfile.ZipFile(wheel).extractall(tmp_path / "site")  # installed: on sys.path, with its RECORD
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    monkeypatch.chdir(tmp_path)
    code, text = start_waiting(["--env", "rendezvous"], capsys)  # --sandbox auto
    assert code == 3, text
    assert "sandbox docker" in text and "PROCESS" not in text  # a custom env is no reason to downgrade
    code, out, err = lero(["resume", "w"], capsys)  # no --env: installed envs are trusted
    assert code == 3, out + err
