"""`lero chat`: the offline guided dialogue, the desk's tools and /commands, and the
tool-calling assistant against a real local OpenAI-compatible HTTP server."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from rich.console import Console

from lero.app.chat.desk import ExperimentDesk
from lero.app.chat.dialogues import guided_dialogue, offline_chat
from lero.app.chat.terminal import run_chat
from lero.app.console.approvals import Asker
from tests.app.test_report import make_run_dir
from tests.support.openai_server import OpenAIServer, Reply

REPO = Path(__file__).resolve().parents[2]
PROBE_KEPT = '{"answer": "yes"}'

# environment, its LERO arguments (N, agents seen, landmarks seen), other env arguments,
# algo, generations, population, steps, seeds, approvals (then the desk asks "start it?")
DIALOGUE = "\n4\n2\n3\n\nippo\n2\n3\n50k\n2\n\n"


@pytest.fixture(autouse=True)
def _few_threads() -> None:
    torch.set_num_threads(1)


def make_desk(answers: str, tmp_path: Path, **base: object) -> tuple[ExperimentDesk, io.StringIO]:
    out = io.StringIO()
    chat_io = Asker(Console(file=out, width=200), io.StringIO(answers))
    return ExperimentDesk(chat_io, base={"runs_dir": str(tmp_path), **base}), out


def test_offline_dialogue_builds_the_confirmed_spec(tmp_path: Path, tmp_path_factory, monkeypatch) -> None:
    cwd = tmp_path_factory.mktemp("cwd")
    monkeypatch.chdir(cwd)  # the declined spec is saved in the working directory
    desk, out = make_desk(DIALOGUE + "n\nn\n", tmp_path)  # do not start, do not redo
    assert offline_chat(desk) == 0
    spec = desk.spec
    assert spec.env_kwargs == {"N": 4, "num_agent_neighbors": 2, "num_landmark_neighbors": 3}
    assert (spec.algo, spec.generations, spec.population) == ("ippo", 2, 3)
    assert (spec.steps, spec.seeds, spec.approve) == (50_000, 2, "spec")
    text = out.getvalue()
    # (2 x 3 + 1 baseline) x 2 seeds = 14 jobs of 50k steps rounded up to 2 x 25,600 (ippo's
    # 1024 envs x 25 steps); the throughput was measured by a real train()
    assert "14 training jobs: 14 in the loop (2 generations x 3 candidates + baseline, x 2 seeds) x 51,200 steps " \
           "= 716,800; 716,800 env steps in all (50,000 requested per job" in text
    assert "steps/s measured here (ippo)" in text
    assert "the user did not start the run" in text and "no experiment started" in text
    assert not any(tmp_path.iterdir())  # nothing was started
    assert json.loads((cwd / "lero-spec.json").read_text())["algo"] == "ippo"


def test_offline_dialogue_rejects_bad_numbers_and_full_observability(tmp_path: Path) -> None:
    # N=0 is refused by the env (asked again); then full observability, local_ratio 0.3
    answers = "\n0\n\n\n\n\n3\nNone\nNone\nlocal_ratio=0.3\n\n1\n1\nlots\ninf\n2k\n1\nall\n"
    desk, out = make_desk(answers, tmp_path)
    assert guided_dialogue(desk)
    assert desk.spec.env_kwargs == {  # mpe2's full observability
        "N": 3, "num_agent_neighbors": None, "num_landmark_neighbors": None, "local_ratio": 0.3
    }
    assert (desk.spec.steps, desk.spec.approve) == (2000, "all")
    assert "must be >= 1" in out.getvalue() and "a positive number of steps" in out.getvalue()


def test_a_refused_answer_keeps_the_previous_default(tmp_path: Path) -> None:
    """num_agent_neighbors 200000 (the steps, typed one prompt early) is refused by the env;
    asked again, the default offered is the one before, 1, and Enter keeps it."""
    answers = "\n\n200000\n\n\n" + "\n" * 5 + "\n" * 6  # the refused round, the env again, the rest
    desk, out = make_desk(answers, tmp_path, steps=1000, generations=1, population=1, seeds=1)
    assert guided_dialogue(desk)
    assert desk.spec.env_kwargs["num_agent_neighbors"] == 1
    text = out.getvalue()
    refused = text.index("num_agent_neighbors must be <=")
    assert "env argument num_agent_neighbors (1): " in text[refused:]
    assert "(200000)" not in text


def test_the_estimate_adds_up_to_what_the_spec_plans(tmp_path: Path) -> None:
    """/estimate's parts, recomputed from the spec: jobs x steps per job per part, their sum the
    env steps, and both the run's planned jobs (RunSpec.budget), confirmation included."""
    import re

    from lero.app.chat.desk import cost_lines, training_estimate
    from lero.graph.configuration import RunSpec

    spec = RunSpec.parse({"steps": 200_000, "env_kwargs": {"N": 4}, "algo": "vdn", "confirm_steps": 600_000})
    iteration = 3136
    (line,) = cost_lines(spec, training_estimate(spec, 1000.0, iteration))
    numbers = [int(n.replace(",", "")) for n in re.findall(r"\d[\d,]*", line)]
    jobs, loop_jobs, generations, population, seeds, per_job, loop_steps = numbers[:7]
    confirm_jobs, top, confirm_seeds, confirm_per_job, confirm_steps, env_steps = numbers[7:13]
    assert (generations, population, seeds, top, confirm_seeds) == (3, 4, 2, 1, 3)
    assert loop_jobs == (generations * population + 1) * seeds == 26 and confirm_jobs == (top + 1) * confirm_seeds
    assert jobs == loop_jobs + confirm_jobs == spec.budget()[0] == 32
    assert per_job == -(-200_000 // iteration) * iteration and confirm_per_job == -(-600_000 // iteration) * iteration
    assert loop_steps == loop_jobs * per_job and confirm_steps == confirm_jobs * confirm_per_job
    assert env_steps == loop_steps + confirm_steps == 8_830_976  # the total, now with its parts


def test_the_spec_is_shown_as_the_fields_that_differ_from_the_defaults(tmp_path: Path) -> None:
    desk, _ = make_desk("", tmp_path)
    desk.set_fields({"env_kwargs": {"N": 4}, "algo": "vdn", "steps": 200_000})
    shown = desk.show_spec().splitlines()
    assert shown[0].startswith("spec, the fields that differ from lero run's defaults")
    assert [line.split() for line in shown[1:]] == [["env.N", "4", "(default", "3)"],
                                                    ["algo", "vdn", "(default", "mappo)"],
                                                    ["steps", "200,000", "(default", "300,000)"],
                                                    ["approve", "spec", "(default", "none)"],
                                                    ["runs_dir", str(tmp_path), "(default",
                                                     f"{Path.cwd() / 'runs'})"]]  # fmt: skip
    assert json.loads(desk.command("/spec all"))["steps"] == 200_000  # every field, on request


def test_offline_chat_runs_the_confirmed_experiment(tmp_path: Path) -> None:
    """Dialogue -> confirm -> the graph's own spec approval -> a real (tiny) run -> report."""
    tiny = {"sandbox": "process", "hparams": {"n_envs": 8, "rollout_len": 25}, "eval_episodes": 8}
    answers = "\n2\nNone\nNone\n\n\n1\n1\n400\n\n\n" + "y\n" + "y\n"  # start it; approve the spec
    desk, out = make_desk(answers, tmp_path, **tiny)
    assert offline_chat(desk) == 0
    run_id = desk.last_run_id
    assert run_id is not None
    assert f"run {run_id} ended with status completed" in out.getvalue()
    report = json.loads((tmp_path / run_id / "report.json").read_text())
    assert report["status"] == "completed" and report["generations"][0]["candidates"] == 1
    spec = json.loads((tmp_path / run_id / "spec.json").read_text())
    assert spec["env_kwargs"] == {"N": 2, "num_agent_neighbors": None, "num_landmark_neighbors": None}
    assert spec["approve"] == "spec"


def test_input_ending_mid_dialogue_starts_nothing(tmp_path: Path) -> None:
    desk, out = make_desk("\n5\n", tmp_path)
    assert offline_chat(desk) == 0
    assert "input ended; no experiment started" in out.getvalue()
    assert not any(tmp_path.iterdir())


def test_desk_set_fields_validates_and_merges(tmp_path: Path) -> None:
    desk, _ = make_desk("", tmp_path)
    assert desk.set_fields({"generations": 0}).startswith(
        "not changed: invalid run setting generations"
    )
    assert desk.spec.generations == 3
    desk.set_fields({"env_kwargs": {"N": 5}, "approve": "none"})
    assert desk.spec.env_kwargs == {"N": 5, "num_agent_neighbors": 1, "num_landmark_neighbors": 2}
    assert desk.spec.approve == "spec"  # chat runs are always confirmed by the human
    assert json.loads(desk.show_spec("all"))["env_kwargs"]["N"] == 5


def test_desk_commands(tmp_path: Path) -> None:
    make_run_dir(tmp_path, "run-a")
    desk, _ = make_desk("", tmp_path)
    assert "  env.N        6  (default 3)" in desk.command("/set env.N=6 generations=2 llm=offline")
    assert desk.spec.generations == 2 and desk.spec.env_kwargs["N"] == 6
    assert "simple_spread" in desk.command("/envs") and "qmix" in desk.command("/envs")
    assert "N=6 agents" in desk.command("/describe")
    assert "expected KEY=VALUE" in desk.command("/set generations")
    assert desk.command("/frobnicate").startswith("commands:")
    assert desk.command("/status a b c").startswith("commands:")
    assert desk.command("/set task='unbalanced").startswith("cannot parse")
    assert json.loads(desk.command("/status run-a"))["best_fitness"] == pytest.approx(-24.0)
    shown = desk.command("/candidate 1-0 run-a")
    assert (
        "def hybrid_reward" in shown and "VERDICT: accept" in shown and '"fitness": -24.0' in shown
    )
    assert "no candidate '9-9'" in desk.command("/candidate 9-9 run-a")
    assert (
        json.loads(desk.command("/report run-a").split("\nreport:")[0])["best"]["candidate_id"]
        == "1-0"
    )
    assert (tmp_path / "run-a" / "report.md").is_file()
    assert desk.command("/status") == "no run id given and no run started in this chat"
    assert desk.command("/status ghost") == f"no run 'ghost' in {tmp_path}/"


def test_desk_tool_calls_never_crash(tmp_path: Path) -> None:
    desk, _ = make_desk("", tmp_path)
    assert {t.name for t in desk.tools()} == set(ExperimentDesk.TOOL_NAMES)
    assert desk.call("rm_rf", {}).startswith("unknown tool 'rm_rf'")
    assert desk.call("set_fields", {"wrong": 1}).startswith("error: ")
    assert "not changed" in desk.call("set_fields", {"updates": {"algo": 3}})


def _tool_call(call_id: str, name: str, args: dict) -> dict:
    return {
        "id": call_id,
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(args)},
    }


def test_assistant_calls_tools_over_http(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    out = io.StringIO()
    with OpenAIServer() as server:
        server.push(
            PROBE_KEPT,  # the server keeps a JSON schema (agents.llm.structured_form)
            "{}",  # the spec filled from the words: nothing named, so the assistant answers
            Reply(
                tool_calls=[
                    _tool_call(
                        "c1", "set_fields", {"updates": {"generations": 2, "env_kwargs": {"N": 4}}}
                    )
                ]
            ),
            Reply(tool_calls=[_tool_call("c2", "start_run", {})]),
            Reply(content="Set 2 generations with 4 agents; you chose not to start it."),
        )
        code = run_chat(
            llm="openai:test-model",
            base_url=server.base_url,
            runs_dir=str(tmp_path),
            console=Console(file=out, width=200),
            stdin=io.StringIO("use 4 agents, 2 generations, then start\nn\n/spec\n/quit\n"),
        )
        requests = server.requests
    assert code == 0
    assert len(requests) == 5
    assert requests[1]["response_format"]["json_schema"]["schema"]["required"][:2] == ["algo", "env"]
    first = requests[2]
    assert {t["function"]["name"] for t in first["tools"]} >= {
        "set_fields",
        "start_run",
        "estimate_cost",
    }
    assert first["messages"][0]["role"] == "system"
    assert first["messages"][0]["content"].startswith("You are the experiment assistant")
    tool_results = [m for m in requests[4]["messages"] if m["role"] == "tool"]
    assert "  generations  2  (default 3)" in tool_results[0]["content"]
    assert tool_results[1]["content"] == ("the user did not start the run; the spec is unchanged and saved in "
                                          f"{tmp_path / 'lero-spec.json'}\n"
                                          f"start it later with: lero run --config {tmp_path / 'lero-spec.json'}")
    assert json.loads((tmp_path / "lero-spec.json").read_text())["env_kwargs"]["N"] == 4
    text = out.getvalue()
    assert "Set 2 generations with 4 agents" in text
    assert ["env.N", "4", "(default", "3)"] in [line.split() for line in text.splitlines()]  # /spec after the conversation
    assert ["llm", "openai:test-model", "(default", "offline)"] in [line.split() for line in text.splitlines()]


def test_assistant_without_tool_calling_falls_back_to_text_and_commands(tmp_path: Path) -> None:
    out = io.StringIO()
    with OpenAIServer() as server:

        def script(request: dict) -> Reply:
            if "tools" in request:
                return Reply(status=400, error_message="tools are not supported")
            return Reply(content="Type /set generations=1 to use one generation.")

        server.script = script
        run_chat(
            llm="openai:test-model",
            base_url=server.base_url,
            runs_dir=str(tmp_path),
            console=Console(file=out, width=200),
            stdin=io.StringIO("one generation please\n/set generations=1\n"),
        )
        # two probes and the fill (no tools; their replies are prose: nothing filled), then the chat
        assert [("tools" in r) for r in server.requests] == [False, False, False, True, False]
    assert "Type /set generations=1" in out.getvalue()
    assert ["generations", "1", "(default", "3)"] in [line.split() for line in out.getvalue().splitlines()]


def test_assistant_server_down_is_reported_and_chat_continues(tmp_path: Path) -> None:
    out = io.StringIO()
    with OpenAIServer() as server:
        server.script = lambda request: Reply(status=401, error_message="bad key")
        run_chat(
            llm="openai:test-model",
            base_url=server.base_url,
            runs_dir=str(tmp_path),
            console=Console(file=out, width=200),
            stdin=io.StringIO("hello\n/set seeds=3\n"),
        )
    text = out.getvalue()
    assert "assistant unavailable" in text and "HTTP 401" in text
    assert ["seeds", "3", "(default", "2)"] in [line.split() for line in text.splitlines()]


def test_lero_chat_subprocess_offline_stops_when_input_ends(tmp_path: Path) -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "lero.app.cli.main",
            "chat",
            "--llm",
            "offline",
            "--runs-dir",
            str(tmp_path),
        ],
        cwd=REPO,
        input="\n4\n",
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert "Experiment design" in done.stdout
    assert "input ended; no experiment started" in done.stdout
    assert not any(tmp_path.iterdir())


def test_offline_dialogue_offers_registered_envs_and_your_own(tmp_path: Path) -> None:
    """A PettingZoo env as package.module:factory; a bad spec is explained and asked again."""
    own = "tests.graph.test_custom_env_loop:make_rendezvous"
    answers = f"other\nnope.nope:make\n\nother\n{own}\nn_agents=2\n\n1\n1\n400\n\n\n"
    desk, out = make_desk(answers, tmp_path, sandbox="process")  # under Docker: test_custom_env_docker
    assert guided_dialogue(desk)
    assert (desk.spec.env, desk.spec.env_kwargs) == (own, {"n_agents": 2})
    assert "cannot import nope.nope" in out.getvalue()
    assert "package.module:factory" in desk.list_environments()
    assert "simple_speaker_listener" in desk.list_environments()


SENTENCE = "I want to train 4 agents on simple_spread with VDN for 200k steps"


def _fill_chat(tmp_path: Path, filled: str, answers: str) -> tuple[str, list[dict]]:
    """`lero chat` on a scripted server: the probe keeps the schema, the fill replies FILLED,
    any later request gets a plain reply; ANSWERS are what the person types."""
    out = io.StringIO()
    with OpenAIServer() as server:
        server.push(PROBE_KEPT, filled)
        server.script = lambda request: Reply(content="Anything else?")
        code = run_chat(llm="openai:test-model", base_url=server.base_url, runs_dir=str(tmp_path),
                        console=Console(file=out, width=200), stdin=io.StringIO(answers))
        requests = server.requests
    assert code == 0
    return out.getvalue(), requests


def _last_spec(text: str) -> dict:
    """The last spec the chat printed (indented JSON, from its `{` to a line `}`)."""
    start = text.rindex('{\n  "')
    return json.loads(text[start: text.index("\n}", start) + 2])


def test_words_fill_the_spec_through_its_schema_once_the_person_agrees(tmp_path: Path) -> None:
    filled = json.dumps({"algo": "vdn", "env": "simple_spread", "N": 4, "num_agent_neighbors": None,
                         "num_landmark_neighbors": None, "steps": 200000, "generations": 1, "population": None,
                         "seeds": 3, "approve": None})
    text, requests = _fill_chat(tmp_path, filled, f"{SENTENCE}\ny\n/spec all\n/quit\n")
    fill = requests[1]
    schema = fill["response_format"]["json_schema"]["schema"]
    assert schema["properties"]["algo"]["enum"] == ["mappo", "ippo", "vdn", "qmix", None]
    assert schema["properties"]["N"] == {"type": ["integer", "null"]}
    assert fill["messages"][-1]["content"] == SENTENCE.replace("200k", "200000")  # written out for the model
    # shown before applied; generations=1 and seeds=3 are not in the words, simple_spread is the spec's already
    assert "from your words: N=4, algo=vdn, steps=200000\n" in text
    spec = _last_spec(text)  # as /spec all shows it
    assert (spec["env_kwargs"]["N"], spec["algo"], spec["steps"], spec["generations"], spec["seeds"]) == (
        4, "vdn", 200000, 3, 2)
    assert len(requests) == 2  # the filled words were the turn: no chat reply on top


def test_a_declined_or_empty_fill_changes_nothing(tmp_path: Path) -> None:
    filled = json.dumps({"algo": "vdn", "N": 4})
    text, _ = _fill_chat(tmp_path, filled, f"{SENTENCE}\nn\n/spec all\n/quit\n")
    assert "from your words: N=4, algo=vdn" in text
    assert (_last_spec(text)["algo"], _last_spec(text)["env_kwargs"]["N"]) == ("mappo", 3)
    for reply in ("The spec is fine.", json.dumps({"algo": "sac"}), json.dumps({"steps": "many"})):
        text, requests = _fill_chat(tmp_path, reply, "use sac please\n/quit\n")
        assert "from your words" not in text and "Anything else?" in text  # not the schema's: the assistant answers
        assert len(requests) == 3
