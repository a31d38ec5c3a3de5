"""The selection episodes' seed is written once, in training.defaults; everyone imports it.

A second literal copy drifts silently: the sandbox would measure candidates on episodes
other than those studies keep their held-out seeds apart from.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from lero.training.defaults import EVAL_SEED

REPO = Path(__file__).resolve().parents[1]
FOLDERS = ("agents", "app", "graph", "sandbox", "training", "benchmarks", "tests")
OWNER = REPO / "training" / "defaults.py"


def literal_copies(value: int) -> list[str]:
    """path:line of every integer literal equal to `value` in the code, its tests and benchmarks."""
    found = []
    for folder in FOLDERS:
        for path in sorted((REPO / folder).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                if isinstance(node, ast.Constant) and type(node.value) is int and node.value == value:
                    found.append(f"{path.relative_to(REPO)}:{node.lineno}")
    return found


def test_the_evaluation_seed_is_written_only_where_it_lives():
    assert literal_copies(EVAL_SEED) == [f"{OWNER.relative_to(REPO)}:{_owner_line()}"]


def _owner_line() -> int:
    """The line of `EVAL_SEED = ...` in training/defaults.py."""
    for node in ast.parse(OWNER.read_text()).body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "EVAL_SEED" for t in node.targets):
            return node.lineno
    raise AssertionError("training/defaults.py no longer assigns EVAL_SEED")


# Job kinds are named only where they are declared and handled (sandbox/jobs*.py); the rest
# of the code sends `<KIND>.name` and reads the declaration (`JobKind.label` for reports).
KIND_HOMES = ("sandbox/jobs.py", "sandbox/jobkinds.py")
CODE_FOLDERS = ("agents", "app", "graph", "sandbox", "training")


def _kindish(node: ast.AST) -> bool:
    """An expression that holds a job kind: `x.kind`, `x["kind"]`, `x.get("kind")`, `kind`."""
    if isinstance(node, ast.Attribute):
        return node.attr == "kind"
    if isinstance(node, ast.Name):
        return node.id in ("kind", "job_kind")
    if isinstance(node, ast.Subscript):
        return isinstance(node.slice, ast.Constant) and node.slice.value == "kind"
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get":
        return bool(node.args) and isinstance(node.args[0], ast.Constant) and node.args[0].value == "kind"
    return False


def _names_in(node: ast.AST, kinds: set[str]) -> list[str]:
    """Kind names written as string constants in NODE (a constant, or a tuple/list/set of them)."""
    items = node.elts if isinstance(node, (ast.Tuple, ast.List, ast.Set)) else [node]
    return [i.value for i in items if isinstance(i, ast.Constant) and i.value in kinds]


def kind_names(source: str, kinds: set[str]) -> list[tuple[int, str]]:
    """(line, kind) of every kind name SOURCE writes where a job kind is meant: `kind="train"`
    (a keyword or a dict key "kind"), a comparison with a kind-holding expression, or a table
    keyed by kind names alone (two or more)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.keyword) and node.arg == "kind":
            found += [(node.value.lineno, name) for name in _names_in(node.value, kinds)]
        elif isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            if any(_kindish(side) for side in sides):
                found += [(node.lineno, name) for side in sides for name in _names_in(side, kinds)]
        elif isinstance(node, ast.Dict):
            keys = [k.value for k in node.keys if isinstance(k, ast.Constant)]
            for key, value in zip(node.keys, node.values, strict=True):
                if isinstance(key, ast.Constant) and key.value == "kind":
                    found += [(value.lineno, name) for name in _names_in(value, kinds)]
            if len(keys) >= 2 and len(keys) == len(node.keys) and set(keys) <= kinds:
                found += [(node.lineno, key) for key in keys]
    return found


def test_no_module_outside_the_kinds_home_names_a_job_kind():
    from lero.sandbox.types import KINDS

    kinds = set(KINDS)
    found = []
    for folder in CODE_FOLDERS:
        for path in sorted((REPO / folder).rglob("*.py")):
            where = str(path.relative_to(REPO))
            if where not in KIND_HOMES:
                found += [f"{where}:{line} {name}" for line, name in kind_names(path.read_text(), kinds)]
    assert not found


def test_the_kind_scan_sees_each_way_of_naming_a_kind():
    kinds = {"train", "evaluate", "validate"}
    source = '''
WORK = {"train": "training", "evaluate": "evaluation"}
job = Job(kind="train", code=None)
if event["kind"] == "evaluate" or record.get("kind") in ("validate", "other"):
    pass
emit({"event": "job_started", "kind": "validate"})
Send("train", task)                      # a graph node's name
COMMANDS = {"train": cmd_train, "runs": cmd_runs}  # a CLI command's
'''
    assert kind_names(source, kinds) == [(2, "train"), (2, "evaluate"), (3, "train"), (4, "evaluate"),
                                         (4, "validate"), (6, "validate")]


def test_a_report_calls_a_kinds_work_by_its_declared_label(monkeypatch):
    from lero.app.reports.run_report import time_markdown
    from lero.sandbox.types import KINDS, JobKind

    monkeypatch.setitem(KINDS, "toy_measure", JobKind("toy_measure", "toy:measure", label="toy measuring"))
    row = {"jobs": 1, "cached": 0, "elapsed_s": 2.0, "wait_s": 0.0, "start_s": 1.0, "run_s": 1.0}
    text = "\n".join(time_markdown({"wall_s": 3.0, "time": {"jobs": {"toy_measure": row, "plugin_kind": row}}}))
    assert "(toy measuring)" in text and "(plugin_kind)" in text  # an undeclared kind: its name


def test_which_kind_is_sealed_is_said_only_in_its_declaration():
    """A line that says a kind by name and the seal beside it restates `JobKind.sealed`:
    the code and its comments say "a sealed kind" and leave the which to sandbox/jobkinds.py."""
    from lero.sandbox.types import KINDS

    said = re.compile(rf"\b({'|'.join(map(re.escape, KINDS))})\b.*\bseal|\bseal.*\b({'|'.join(map(re.escape, KINDS))})\b",
                      re.IGNORECASE)
    found = []
    for folder in CODE_FOLDERS:
        for path in sorted((REPO / folder).rglob("*.py")):
            if str(path.relative_to(REPO)) != "sandbox/jobkinds.py":
                found += [f"{path.relative_to(REPO)}:{number}" for number, line in
                          enumerate(path.read_text().splitlines(), start=1) if said.search(line)]
    assert not found


def test_the_design_modes_are_declared_once_and_read_everywhere():
    """agents.llm_config.DESIGN_MODES is the one list: the CLI's choices and help, the spec's
    validation and the team read it; no other module writes a mode's name as a string."""
    import argparse

    from lero.agents import make_team
    from lero.agents.debugger import Debugger
    from lero.agents.expression.roles import ExpressionDebugger
    from lero.agents.llm_config import DESIGN_MODES, DESIGNS, DUMMY_API_KEY, LLMConfig
    from lero.app.cli.args import build_parser
    from lero.graph.configuration import RunError, RunSpec

    run = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)).choices["run"]
    flag = next(a for a in run._actions if "--design" in a.option_strings)
    assert tuple(flag.choices) == DESIGNS
    assert all(mode.help in flag.help for mode in DESIGN_MODES)
    assert RunSpec().design == LLMConfig().design == DESIGNS[0]
    with pytest.raises(RunError, match="design"):
        RunSpec.parse({"design": "freestyle"})
    for mode in DESIGN_MODES:
        team = make_team(LLMConfig(backend="openai", model="m", base_url="http://127.0.0.1:9/v1", api_key=DUMMY_API_KEY,
                                   design=mode.name))
        assert type(team.designer).__module__.endswith({"code": "designer", "structured": "structured",
                                                       "expression": "roles"}[mode.writes]), mode.name
        assert type(team.debugger) is (ExpressionDebugger if mode.expressions else Debugger), mode.name
        assert team.critic.structured == mode.rendered_review, mode.name
        assert (team.structured is not None) == (team.expression is not None) == mode.fallback, mode.name
    for module in ("app/cli/args.py", "graph/configuration.py"):  # the layers above the owner
        assert not mode_lists((REPO / module).read_text(), set(DESIGNS)), module


def mode_lists(source: str, names: set[str]) -> list[int]:
    """Lines of SOURCE that list NAMES: three or more in one string (as words: "LLM code runs
    ... or auto" is prose) or two or more as the string items of one tuple, list or set (one
    name alone, as the sandbox's "auto", is no list)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            if len(set(re.findall(r"[a-z]+", node.value)) & names) >= 3:
                found.append(node.lineno)
        elif isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            items = {item.value for item in node.elts if isinstance(item, ast.Constant)}
            if len(items & names) >= 2:
                found.append(node.lineno)
    return found


def test_the_mode_list_scan_sees_a_restated_list():
    names = {"auto", "code", "structured"}
    old_help = 'p.add_argument("--design", help="auto (default) edits modules; code writes; structured picks")'
    assert mode_lists(old_help, names) == [1]
    assert mode_lists('Design = Literal["auto", "code"]', names) == [1]
    assert mode_lists('sandbox: Literal["auto", "docker", "process"] = "auto"', names) == []


def test_the_run_flags_are_the_spec_fields_and_their_help():
    """Each `lero run` flag that sets a RunSpec field takes its help from the field's
    description, and spec_fields passes it on by its dest (no list of flags to keep up)."""
    import argparse

    from lero.app.cli.args import MERGED_FIELDS, build_parser, spec_fields
    from lero.graph.configuration import RunSpec, field_help

    run = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)).choices["run"]
    flags = {a.dest: a for a in run._actions if a.dest in RunSpec.model_fields and a.dest not in MERGED_FIELDS}
    described = {name for name, info in RunSpec.model_fields.items() if info.description}
    assert set(flags) == described
    for name, action in flags.items():
        assert action.help == field_help(name), name
    assert field_help("population") == f"{RunSpec.model_fields['population'].description} (default 4)"
    given = spec_fields(run.parse_args(["--population", "5", "--designer-seed", "7", "--job-timeout", "9"]))
    assert (given["population"], given["designer_seed"], given["job_timeout_s"]) == (5, 7, 9.0)
