"""docs/internals.md's recipes, held against their rehearsals and the registries they extend.

Each recipe ("### A new ...", then "Files: ..." and "Rehearsal: ...") names the files a new
entry of lero's own touches and the test module that performs the recipe from that module
alone. These tests perform the cheap part of each rehearsal with its toy (its stage wired
and routed to, its kind declared and typed, its task made and stepped, its algorithm's
hyper-parameters typed, its command parsed and found), check that the graph's wiring names
no candidate stage, and walk every registry (tasks, algorithms, sandbox job kinds, LLM
roles, CLI commands) to check that each entry lives in the files its recipe names and that
a test in the recipe's test folder names it.
"""

from __future__ import annotations

import ast
import inspect
import re
import typing
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
INTERNALS = REPO / "docs" / "internals.md"


def recipes() -> dict[str, list[str]]:
    """Recipe title ("task", "algorithm", ...) -> the paths its Files line names."""
    text = INTERNALS.read_text()
    found = re.findall(r"^### A new (.+?)\nFiles: (.+)$", text, flags=re.MULTILINE)
    return {title: re.findall(r"`([^`]+)`", files) for title, files in found}


def rehearsals() -> dict[str, str]:
    """Recipe title -> the test module its Rehearsal line names (recipes without one left out)."""
    found = re.findall(r"^### A new (.+?)\nFiles: .+\nRehearsal: `(tests/[^`]+\.py)`", INTERNALS.read_text(),
                       flags=re.MULTILINE)
    return dict(found)


def _test_folder(title: str) -> Path:
    line = re.search(rf"^### A new {re.escape(title)}\nFiles: .*a test in `(tests/[a-z]+/)`", INTERNALS.read_text(),
                     flags=re.MULTILINE)
    assert line, f"the {title} recipe names no test folder"
    return REPO / line.group(1)


def _named_by_a_test(title: str, word: str) -> bool:
    return any(word in path.read_text() for path in _test_folder(title).glob("test_*.py"))


def _existing(paths: list[str], **placeholders: str) -> list[str]:
    """The recipe's paths with the placeholders filled that do not exist."""
    missing = []
    for path in paths:
        for name, value in placeholders.items():
            path = path.replace(f"<{name}>", value)
        package = REPO / path.removesuffix(".py") / "__init__.py"  # a module grown into a package
        if "<" not in path and not (REPO / path).exists() and not (path.endswith(".py") and package.exists()):
            missing.append(path)
    return missing


def _source_file(obj: object) -> str:
    return str(Path(inspect.getfile(obj)).resolve().relative_to(REPO))


def test_every_recipe_is_there_with_its_files() -> None:
    found = recipes()
    assert set(found) == {"task", "algorithm", "sandbox job kind", "LLM role", "CLI command"}
    for title, paths in found.items():
        assert paths, f"the {title} recipe names no file"
        assert not _existing([p for p in paths if "<" not in p]), title


def test_every_rehearsal_is_a_test_module() -> None:
    found = rehearsals()
    assert set(found) == set(recipes())
    for title, path in found.items():
        tree = ast.parse((REPO / path).read_text())
        tests = [node.name for node in tree.body if isinstance(node, ast.FunctionDef) and node.name.startswith("test_")]
        assert tests, f"the {title} rehearsal {path} holds no test"


def test_the_role_rehearsal_is_wired_through_the_declarations(monkeypatch) -> None:
    """The toy auditor's two declarations alone put its node into the graph, route candidates
    waiting in its stage to it, hand the critic's passes on to it, and build it in the team."""
    from lero.agents import LLMConfig, make_team
    from lero.graph import stages
    from lero.graph.graph import build_graph, route_candidates
    from tests.graph import test_toy_role as toy

    assert "audit" not in build_graph().nodes
    toy.declare_auditor(monkeypatch)
    graph = build_graph()
    assert "audit" in graph.nodes
    assert "audit" in graph.branches["critique"]["route_candidates"].ends
    waiting = {"candidates": [{"stage": "validate"}, {"stage": "audit"}]}
    assert route_candidates(waiting, None) == "audit"  # served before the stage it precedes
    assert stages.onward("review") == "audit"
    team = make_team(LLMConfig(backend="offline"))
    assert team.added == {"auditor": None} and team.auditor is None  # no offline stand-in


def test_the_job_kind_rehearsal_declares_its_kinds() -> None:
    from lero.sandbox.types import Job, kind_of
    from tests.sandbox import test_toy_kind as toy

    for kind in (toy.WRITE, toy.SCORE):
        assert kind_of(kind.name) is kind and kind.source == toy.__file__
    assert Job(kind=toy.SCORE.name, code=None, policy_dir="/x").limits == toy.TOY_LIMITS


def test_the_algorithm_rehearsal_declares_its_algorithm(monkeypatch) -> None:
    """The toy's registration alone makes it a choice of every algorithm reader, with its
    own typed hyper-parameters, until the monkeypatch undoes it."""
    from lero.training import ALGOS, TrainConfig
    from lero.training.algos import ALGORITHMS
    from tests.training import test_toy_algorithm as toy

    assert toy.TOY not in ALGOS
    toy.declare_lite(monkeypatch)
    assert ALGORITHMS[toy.TOY].learner is toy.train_lite and ALGORITHMS[toy.TOY].centralised
    assert TrainConfig(algo=toy.TOY, hparams={"hidden": 8}).algo_hparams() == toy.LiteHparams(hidden=8)


def test_the_command_rehearsal_declares_its_command(monkeypatch) -> None:
    """The toy's registration alone gives `lero` a sub-parser with its flags and a function
    to run, until the monkeypatch undoes it."""
    from lero.app.cli.args import build_parser
    from lero.app.cli.main import command_function
    from tests.app import test_toy_command as toy

    toy.declare_greet(monkeypatch)
    args = build_parser().parse_args(["greet", "you", "--times", "3"])
    assert (args.command, args.who, args.times) == ("greet", "you", 3)
    assert command_function("greet") is toy.cmd_greet


def test_the_task_rehearsal_makes_and_steps_its_env() -> None:
    import torch

    from lero.training import make_env
    from tests.graph import test_custom_env_loop as toy

    env = make_env(toy.SPEC, n_envs=2)
    obs = env.reset(seed=0)  # [B, N, obs_dim]
    _, reward, done, _ = env.step(torch.zeros(obs.shape[:2], dtype=torch.int64))
    assert reward.shape == obs.shape[:2] and done.shape == (2,)


def _code_strings(path: Path) -> set[str]:
    """String constants of a module's code, docstrings left out."""
    tree = ast.parse(path.read_text())
    docstrings = {id(node.value) for node in ast.walk(tree) if isinstance(node, ast.Expr)}
    return {node.value for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings}


def test_the_graph_wiring_names_no_candidate_stage() -> None:
    """graph.py and state.py read the stage declarations: a new stage edits neither."""
    from lero.graph import stages

    names = {stage.name for stage in stages.ordered()} | {stage.node.__name__ for stage in stages.ordered()}
    for module in ("graph/graph.py", "graph/state.py"):
        assert not _code_strings(REPO / module) & names, module


def test_every_task_follows_the_task_recipe() -> None:
    from lero.training.envs.registry import _ENVS, ENV_NAMES

    paths = recipes()["task"]
    for name in ENV_NAMES:
        env_class = _ENVS[name][0]
        assert _source_file(env_class) == f"training/envs/{name}.py", name
        assert env_class.task.name == name
        assert not _existing(paths, task=name), name
        assert _named_by_a_test("task", f'"{name}"'), f"no test in tests/training/ names {name}"


def test_every_algorithm_follows_the_algorithm_recipe() -> None:
    from lero.training.algos import ALGORITHMS

    paths = recipes()["algorithm"]
    for name, row in ALGORITHMS.items():
        home = _source_file(row.learner)
        assert home == _source_file(row.hparams), f"{name}: learner and hyper-parameters in one file"
        family = Path(home).stem
        assert home == f"training/algos/{family}.py"
        assert "algo ==" not in Path(REPO, home).read_text(), f"{home} reads a name, not the declaration"
        assert not _existing(paths, family=family), name
        assert _named_by_a_test("algorithm", f'"{name}"'), f"no test in tests/training/ names {name}"


def test_every_job_kind_follows_the_job_kind_recipe() -> None:
    import lero.sandbox.jobkinds as declared
    from lero.sandbox.harness import resolve_handler
    from lero.sandbox.types import KINDS, JobKind

    paths = recipes()["sandbox job kind"]
    assert not _existing(paths)
    own = {kind.name for kind in vars(declared).values() if isinstance(kind, JobKind)}
    assert own == {name for name, kind in KINDS.items() if kind.source is None}
    for name in own:
        assert _source_file(resolve_handler(name)) == "sandbox/jobs.py", name
        assert _named_by_a_test("sandbox job kind", f'"{name}"'), f"no test in tests/sandbox/ names {name}"


# Team fields that are a mode of another role (the designer answering JSON, or expressions)
MODE_OF_ROLE = {"structured": "designer", "expression": "designer"}
MAX_ROLE_FILES = 5  # what a new LLM role may touch, its test apart


def _graph_node_modules() -> set[str]:
    """The files that define the nodes `build_graph()` wires (through their wrappers)."""
    from lero.graph.graph import build_graph

    return {_source_file(inspect.unwrap(spec.runnable.func)) for spec in build_graph().nodes.values()}


def test_every_role_follows_the_role_recipe() -> None:
    from lero.agents.team import FIELD_ROLES, ROLES, Team

    paths = recipes()["LLM role"]
    files = [path for path in paths if not path.startswith("tests/")]
    assert len(files) <= MAX_ROLE_FILES, f"a new role touches {len(files)} files: {files}"
    callers = [*(REPO / "graph" / "nodes").glob("*.py"), REPO / "app" / "chat" / "dialogues.py"]
    wired = _graph_node_modules()
    hints = typing.get_type_hints(Team)
    assert tuple(ROLES) == FIELD_ROLES == tuple(f for f in hints if f not in ("ledger", "added")), "ROLES and Team differ"
    for role in ROLES:
        classes = [c for c in typing.get_args(hints[role]) if c is not type(None)] or [hints[role]]
        source = _source_file(classes[0])  # a role's module, or its package's
        assert source == f"agents/{role}.py" or source.startswith(f"agents/{role}/"), role
        # a field that holds another mode of a role (Team.structured: the designer answering
        # JSON) keeps that role's prompts under `<role>_<mode>_*.md`
        named = MODE_OF_ROLE.get(role, role)
        prompt = REPO / "agents" / "prompts" / (f"{named}_{role}_system.md" if role in MODE_OF_ROLE else f"{role}_system.md")
        assert named in prompt.read_text().splitlines()[0], f"{prompt.name}'s first line names its role"
        assert not [path for path in _existing(paths, role=role) if path != f"agents/prompts/{role}_system.md" or role not in MODE_OF_ROLE], role
        calling = [path for path in callers if re.search(rf"\.{role}\b", path.read_text())]
        assert calling, f"nothing calls {role}"
        in_graph = [str(path.relative_to(REPO)) for path in calling if path.parent.name == "nodes"]
        assert not in_graph or set(in_graph) & wired, f"no node of build_graph() calls {role}"
        assert _named_by_a_test("LLM role", role), f"no test in tests/agents/ names {role}"


def test_a_node_keeps_its_own_state_beside_it(tmp_path) -> None:
    """The role recipe's claim that a role's state needs no edit of graph/state.py: a node's
    own TypedDict (extending RunState) given as its input schema is a channel that another
    node reads, checkpointed by lero's strict saver across an interrupt and a new process's
    graph."""
    from langgraph.graph import END, START, StateGraph
    from langgraph.types import Command, interrupt

    from lero.graph.checkpoints import open_saver
    from lero.graph.state import RunState

    class Noted(RunState, total=False):
        note: str  # declared beside the node that writes it

    def write(state: Noted) -> dict:
        return {"note": f"kept at generation {state['generation']}"}

    def wait(state: Noted) -> dict:
        interrupt({"kind": "generation"})
        return {}

    def read(state: Noted) -> dict:
        return {"reflection": state["note"]}

    def graph(saver):
        builder = StateGraph(RunState)
        for name, node in (("write", write), ("wait", wait), ("read", read)):
            builder.add_node(name, node, input_schema=Noted)
        builder.add_edge(START, "write")
        builder.add_edge("write", "wait")
        builder.add_edge("wait", "read")
        builder.add_edge("read", END)
        return builder.compile(checkpointer=saver)

    config = {"configurable": {"thread_id": "t"}}
    with open_saver(tmp_path / "c.sqlite") as saver:
        graph(saver).invoke({"generation": 2}, config)
    with open_saver(tmp_path / "c.sqlite") as saver:
        final = graph(saver).invoke(Command(resume="continue"), config)
    assert final["reflection"] == "kept at generation 2"


def test_every_command_follows_the_command_recipe() -> None:
    import argparse

    from lero.app.cli.args import COMMANDS, build_parser
    from lero.app.cli.main import command_function

    parser = build_parser()
    actions = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    assert len(actions) == 1
    assert list(actions[0].choices) == list(COMMANDS)
    for name, command in COMMANDS.items():
        run = command_function(name)
        assert run.__name__ == f"cmd_{name}" and _source_file(run) == "app/cli/main.py", name
        assert _source_file(command.flags) == "app/cli/args.py", name
        assert _named_by_a_test("CLI command", f'"{name}"'), f"no test in tests/app/ runs lero {name}"


def test_the_checks_see_a_missing_file_and_an_untested_entry() -> None:
    assert _existing(["training/envs/<task>.py", "app/cli/main.py"], task="no_such_task") == ["training/envs/no_such_task.py"]
    assert not _named_by_a_test("algorithm", '"no_such_algorithm"')
    assert _named_by_a_test("algorithm", '"mappo"')
