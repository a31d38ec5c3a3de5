"""The dependency rule, read from the code's own imports.

Every ``import`` and ``from ... import`` node counts, those inside functions and
``if TYPE_CHECKING:`` blocks too: a lazy import hides a circle from Python, not from this
test. Folders may import only down the floors (app -> graph -> agents, sandbox, training;
sandbox -> training; agents -> training's contract, task data, lazy-init helper and value checks only), and no two
modules import each other, directly or around a circle: a cycle inside one folder is as
hard to read, test and move as one across folders.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FOLDERS = ("agents", "app", "graph", "sandbox", "training")
ALLOWED = {  # folder -> the other folders its modules may import
    "app": {"graph", "agents", "sandbox", "training"},
    "graph": {"agents", "sandbox", "training"},
    "agents": {"training"},
    "sandbox": {"training"},
    "training": set(),
}
AGENTS_MAY_IMPORT = {"lero.training.contract", "lero.training.envs.task", "lero.training.lazy",  # contract, data, lazy init
                     "lero.training.validation"}  # and the one finite-number check every layer reads numbers with
# app's front-ends share app.cli.args / app.chat.desk / app.chat.dialogues / app.console.progress / app.reports.run_report, never each other;
# the `lero` dispatcher (app.cli.main) may start the others
FRONT_ENDS = ("lero.app.chat.terminal", "lero.app.ui", "lero.app.cli.worker")
DISPATCHER = "lero.app.cli.main"


@dataclass(frozen=True)
class Import:
    importer: str  # module name, lero.<folder>...
    target: str  # the lero module it names (a package for `from package import name`)
    where: str  # path:line


def lero_modules(root: Path) -> dict[str, Path]:
    """Module name -> file of every .py under the folders (a package is its __init__.py)."""
    modules = {}
    for folder in FOLDERS:
        for path in sorted((root / folder).rglob("*.py")):
            parts = path.relative_to(root).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            modules[".".join(("lero", *parts))] = path
    return modules


def _imports(root: Path, modules: dict[str, Path]) -> Iterator[Import]:
    """Every import of a ``lero.<folder>`` module, wherever in the file it stands."""
    for importer, path in modules.items():
        package = importer if path.name == "__init__.py" else importer.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:  # relative: from the importer's package, level - 1 packages up
                    anchor = package.rsplit(".", node.level - 1)[0]
                    base = f"{anchor}.{base}" if base else anchor
                names = [
                    f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base
                    for alias in node.names
                ]
            else:
                continue
            for name in dict.fromkeys(names):
                if name.startswith("lero."):
                    yield Import(importer, name, f"{path.relative_to(root)}:{node.lineno}")


def _executed(target: str, importer: str) -> list[str]:
    """The modules that importing ``target`` runs: its packages and itself, less the
    importer's own packages (Python started those before the importer's body)."""
    parts = target.split(".")
    chain = [".".join(parts[:n]) for n in range(2, len(parts) + 1)]
    return [name for name in chain if name != importer and not importer.startswith(name + ".")]


def _components(graph: dict[str, set[str]]) -> list[set[str]]:
    """Strongly connected components of more than one module (Tarjan): the import cycles."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for successor in sorted(graph[node]):
            if successor not in index:
                visit(successor)
                low[node] = min(low[node], low[successor])
            elif successor in on_stack:
                low[node] = min(low[node], index[successor])
        if low[node] == index[node]:
            component = set()
            while node not in component:
                component.add(stack.pop())
            on_stack.difference_update(component)
            if len(component) > 1:
                components.append(component)

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return components


def _front_end(module: str) -> str | None:
    """The front-end (or the dispatcher) a module belongs to, if any."""
    for front in (*FRONT_ENDS, DISPATCHER):
        if module == front or module.startswith(front + "."):
            return front
    return None


def import_problems(root: Path) -> list[str]:
    """Every import that breaks the folder rule, and every import cycle, as sorted lines."""
    modules = lero_modules(root)
    graph: dict[str, set[str]] = {name: set() for name in modules}
    first_seen: dict[tuple[str, str], str] = {}  # edge -> where its first import is
    problems = []
    for found in _imports(root, modules):
        source, destination = found.importer.split(".")[1], found.target.split(".")[1]
        if destination not in FOLDERS:
            continue
        if source != destination and destination not in ALLOWED[source]:
            problems.append(f"{found.where}: {source} imports {destination} ({found.target})")
        elif source == "agents" and destination == "training" and found.target not in AGENTS_MAY_IMPORT:
            problems.append(f"{found.where}: agents imports training internals ({found.target})")
        front, other = _front_end(found.importer), _front_end(found.target)
        if front not in (None, DISPATCHER, other) and other is not None:
            problems.append(f"{found.where}: front-end {front} imports front-end {other}")
        for executed in _executed(found.target, found.importer):
            if executed in graph:
                graph[found.importer].add(executed)
                first_seen.setdefault((found.importer, executed), found.where)
    for component in _components(graph):
        folders = sorted({name.split(".")[1] for name in component})
        what = f"folders {', '.join(folders)}" if len(folders) > 1 else f"modules of {folders[0]}"
        edges = sorted(
            f"{source} -> {target} ({first_seen[source, target]})"
            for source in component
            for target in graph[source] & component
        )
        problems.append(f"import cycle joining {what}: {'; '.join(edges)}")
    return sorted(problems)


def _plant(root: Path, files: dict[str, str]) -> None:
    for name, source in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(source)


def test_the_checker_finds_a_planted_violation_and_planted_cycles(tmp_path: Path) -> None:
    _plant(tmp_path, {
        # a forbidden edge, hidden in a function: training imports graph ...
        "training/__init__.py": "",
        "training/x.py": "def later():\n    import lero.graph.y\n",
        # ... which imports it back (allowed alone): a cycle across two folders
        "graph/__init__.py": "",
        "graph/y.py": "from lero.training import x\n",
        # agents may read training's contract, not the rest of training
        "agents/__init__.py": "",
        "agents/z.py": "from lero.training.contract import static_check\n"
                       "from lero.training.hooks import Hooks\n",
        "training/contract.py": "",
        "training/hooks.py": "",
        # a cycle in one folder: one side lazy, the other under TYPE_CHECKING, relative
        "sandbox/__init__.py": "",
        "sandbox/factory.py": "def get():\n    from lero.sandbox.ray_executor import RaySandbox\n",
        "sandbox/ray_executor.py": "from typing import TYPE_CHECKING\n"
                                   "if TYPE_CHECKING:\n    from .factory import get\n",
        # a package importing its children, which import their siblings: no cycle ...
        "training/algos/__init__.py": "from lero.training.algos.ppo import learn\n",
        "training/algos/ppo.py": "from lero.training.algos.nets import mlp\n"
                                 "from lero.training.policy import Policy\n",
        "training/algos/nets.py": "",
        # ... but a module outside it importing one child runs the package, hence every learner
        "training/policy.py": "from lero.training.algos import nets\n",
        # the web UI borrowing the terminal chat's parser: front-ends share app.cli.args instead
        "app/__init__.py": "",
        "app/cli/main.py": "from lero.app.chat.terminal import run_chat\n",
        "app/chat/terminal.py": "",
        "app/ui/__init__.py": "",
        "app/ui/app.py": "from lero.app.cli.args import build_parser\nfrom lero.app.cli.main import spec_fields\n",
        "app/cli/args.py": "",
    })
    assert import_problems(tmp_path) == [
        "agents/z.py:2: agents imports training internals (lero.training.hooks)",
        "app/ui/app.py:2: front-end lero.app.ui imports front-end lero.app.cli.main",
        "import cycle joining folders graph, training: "
        "lero.graph.y -> lero.training.x (graph/y.py:1); "
        "lero.training.x -> lero.graph.y (training/x.py:2)",
        "import cycle joining modules of sandbox: "
        "lero.sandbox.factory -> lero.sandbox.ray_executor (sandbox/factory.py:2); "
        "lero.sandbox.ray_executor -> lero.sandbox.factory (sandbox/ray_executor.py:3)",
        "import cycle joining modules of training: "
        "lero.training.algos -> lero.training.algos.ppo (training/algos/__init__.py:1); "
        "lero.training.algos.ppo -> lero.training.policy (training/algos/ppo.py:2); "
        "lero.training.policy -> lero.training.algos (training/policy.py:1)",
        "training/x.py:2: training imports graph (lero.graph.y)",
    ]


def test_the_code_keeps_the_dependency_rule() -> None:
    assert import_problems(REPO) == []
