"""The candidate module contract: the text shown to the LLM and a static AST check.

Pure Python (no torch) so the agents package can import it. The check is defence in
depth: the sandbox is the real boundary. It rejects candidates that step outside the
small language an HRF/OEF needs, before any compute (or container) is spent on them.

Rules (each `Violation.rule`):
- `syntax`: the source does not parse.           - `size`: more than MAX_SOURCE_CHARS.
- `import`: anything but `math`, `numpy`, `torch` (and their submodules); no relative imports.
- `forbidden-name`: a builtin that reaches the interpreter or the file system
  (FORBIDDEN_NAMES), called or merely named.
- `dunder`: a `__dunder__` name, attribute, parameter or string constant.
- `private-attribute`: an attribute starting with `_` (`torch._C`, `np._core`, ...).
- `denied-attribute`: an attribute named in DENIED_ATTRIBUTES, i.e. a way from
  torch/numpy to the OS, to files, to native code or to a compiler.
- `attribute-store`: assigning or deleting an attribute (`torch.x = f`, `ctx.obs = ...`):
  no monkeypatching of the trusted code, and `ctx` stays read-only.
- `top-level`: a module-level statement other than a docstring, imports, function
  definitions and constant assignments.
- `missing-function` / `signature`: `hybrid_reward` and `enhance_observation` must be
  module-level functions with exactly one positional parameter; the optional `potential`,
  when defined, with exactly two (`FUNCTION_ARITY`).
"""

from __future__ import annotations

import ast
import re
import threading
from dataclasses import dataclass

MAX_SOURCE_CHARS = 32_000
ALLOWED_IMPORTS = frozenset({"math", "numpy", "torch"})
REQUIRED_FUNCTIONS = ("hybrid_reward", "enhance_observation")
OPTIONAL_FUNCTIONS = ("potential",)  # the shaping potential Phi (training.shaping)
FUNCTION_ARITY = {"hybrid_reward": 1, "enhance_observation": 1, "potential": 2}  # positional parameters
# how a hook error names a reward term (training.hooks), read back by the debugger's slot choice
NAMED_COMPONENT = re.compile(r"component '([^']+)'")


def component_label(name: str) -> str:
    """A reward term as hook errors name it (`NAMED_COMPONENT` reads it back)."""
    return f"component {name!r}"


FORBIDDEN_NAMES = frozenset(
    {
        "eval", "exec", "compile", "open", "__import__", "globals", "locals", "vars",
        "getattr", "setattr", "delattr", "hasattr", "input", "breakpoint", "memoryview",
        "type", "object", "super", "help", "exit", "quit", "dir", "id",
    }
)  # fmt: skip

# Attribute names that lead from torch/numpy to the operating system, files, native
# code, pickling or code generation. Blocked wherever they appear (`torch.os.system`,
# `np.load`, `torch.utils.cpp_extension`, `torch.ops.load_library`, ...).
DENIED_ATTRIBUTES = frozenset(
    {
        # the OS and the interpreter
        "os", "sys", "subprocess", "builtins", "importlib", "inspect", "ctypes", "ctypeslib",
        "socket", "signal", "shutil", "pathlib", "io", "threading", "multiprocessing",
        "pickle", "marshal", "gc", "weakref", "types", "code", "codeop", "system", "popen",
        "spawn", "environ", "getenv",
        # files
        "load", "save", "loadtxt", "savetxt", "savez", "savez_compressed", "genfromtxt",
        "fromfile", "tofile", "memmap", "open_memmap", "fromregex", "DataSource", "from_file",
        "load_state_dict", "state_dict", "serialization", "hub", "package", "lib", "npyio",
        "format", "f2py", "distutils", "testing", "dump", "dumps", "profiler", "onnx",
        "share_memory_",  # ndarray.dump (a pickle file), .dumps, trace and model files, shm
        # native code and compilers
        "cpp_extension", "load_library", "load_inline", "library", "ops", "jit", "compile",
        "_dynamo", "export", "fx", "utils", "backends", "distributed", "cuda",
    }
)  # fmt: skip

CANDIDATE_FILE = "candidate.py"  # the filename candidate code is compiled under: tracebacks name it

CONTRACT_TEXT = """\
Write ONE Python module that defines both functions below. Only `math`, `numpy` and
`torch` may be imported. Module level may hold only a docstring, imports, function
definitions and constant assignments. No file, network or OS access, no
eval/exec/getattr/open, no dunder (`__x__`) or private (`_x`) attributes, no assigning
attributes (do not modify `ctx`, torch or numpy).

```python
import torch

def hybrid_reward(ctx) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    \"\"\"Per-agent rewards [B, N] and named components (each [B, N] or [B]).\"\"\"

def enhance_observation(obs: torch.Tensor) -> torch.Tensor:
    \"\"\"obs: [M, D] local observations, one row per agent.
    Returns [M, D + k]; the first D columns must equal obs (augment, not replace).\"\"\"
```

`ctx` (read-only, all tensors batched over B parallel envs and N agents):
`ctx.obs` [B,N,D] local obs before the step, `ctx.next_obs` [B,N,D],
`ctx.actions` [B,N], `ctx.env_reward` [B,N] (the environment's own reward),
`ctx.state` dict of named world tensors (the environment description lists its fields,
e.g. `agent_pos` [B,N,2]), `ctx.step` [B] step within episode,
`ctx.progress` float in [0,1] (fraction of the training budget used).
When the agents differ (roles with different observations or actions), every obs row
has the same width D: agent i's own values first, then zeros up to D (the environment
description gives each role's layout). In `enhance_observation`, row m of `obs`
belongs to agent m % N (agent order as in the description), so `torch.arange(M) % N`
tells each row's agent and role; keep the first D columns, padding included.
The HRF is used only in training, so it may use global state (`ctx.state`). The OEF
runs at execution time on one agent's own observation: it may use only `obs` (CTDE).
Both must return finite float32 tensors of the stated shapes and be fast (vectorised
torch, no Python loops over the batch). HRF components are logged and summarised for
reflection.
"""

# The optional third function, offered where reward design needs it most (a sparse task's
# prompt adds it: `contract_text`); the static check and the engine accept it everywhere.
POTENTIAL_TEXT = """\
Optionally a third function, a shaping potential (Ng, Harada & Russell 1999):

```python
def potential(state, obs) -> torch.Tensor:
    \"\"\"Phi [B, N] (one value per agent) of ONE state: `state` its named world tensors
    (as ctx.state), `obs` [B, N, D] its local observations.\"\"\"
```

lero adds F = gamma * Phi(s') - Phi(s) to every agent's reward (Phi = 0 after a terminal
step), which leaves the task's optimal policies unchanged: a module whose hybrid_reward
returns ctx.env_reward and that shapes only through `potential` is policy-invariant.
Make Phi higher closer to success (e.g. minus the distance to the agent's own goal).
"""


def contract_text(potential: bool) -> str:
    """The contract for a prompt; POTENTIAL: with the optional `potential` (a sparse task)."""
    return CONTRACT_TEXT + ("\n" + POTENTIAL_TEXT if potential else "")


@dataclass(frozen=True)
class Violation:
    """One broken rule, with the 1-based source line it was found on (0 = whole module)."""

    rule: str
    line: int
    message: str

    def __str__(self) -> str:
        return f"line {self.line}: [{self.rule}] {self.message}"


def _is_dunder(name: str) -> bool:
    return name.startswith("__") and name.endswith("__") and len(name) > 4


def _is_constant_expr(node: ast.expr) -> bool:
    """Literals, containers and arithmetic of literals, and names (`PI = math.pi`)."""
    match node:
        case ast.Constant() | ast.Name() | ast.Attribute():
            return True
        case ast.Tuple(elts=items) | ast.List(elts=items) | ast.Set(elts=items):
            return all(_is_constant_expr(item) for item in items)
        case ast.Dict(keys=keys, values=values):
            return all(k is not None and _is_constant_expr(k) for k in keys) and all(
                _is_constant_expr(v) for v in values
            )
        case ast.UnaryOp(operand=operand):
            return _is_constant_expr(operand)
        case ast.BinOp(left=left, right=right):
            return _is_constant_expr(left) and _is_constant_expr(right)
    return False


class _Checker(ast.NodeVisitor):
    def __init__(self) -> None:
        self.violations: list[Violation] = []

    def flag(self, rule: str, node: ast.AST, message: str) -> None:
        self.violations.append(Violation(rule, getattr(node, "lineno", 0), message))

    def check_import_path(self, node: ast.AST, dotted: str) -> None:
        parts = dotted.split(".")
        if parts[0] not in ALLOWED_IMPORTS:
            self.flag("import", node, f"import of '{dotted}' (only math, numpy, torch)")
        for part in parts[1:]:
            self.check_attribute_name(node, part)

    def check_attribute_name(self, node: ast.AST, name: str) -> None:
        if _is_dunder(name):
            self.flag("dunder", node, f"dunder attribute '{name}'")
        elif name.startswith("_"):
            self.flag("private-attribute", node, f"private attribute '{name}'")
        elif name in DENIED_ATTRIBUTES:
            self.flag("denied-attribute", node, f"attribute '{name}' (OS, file or native access)")

    def check_name(self, node: ast.AST, name: str) -> None:
        if name in FORBIDDEN_NAMES:
            self.flag("forbidden-name", node, f"use of '{name}'")
        elif _is_dunder(name):
            self.flag("dunder", node, f"dunder name '{name}'")

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self.check_import_path(node, alias.name)
            if alias.asname:
                self.check_name(node, alias.asname)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.level or not node.module:
            self.flag("import", node, "relative import")
            return
        self.check_import_path(node, node.module)
        for alias in node.names:
            if alias.name == "*":
                self.flag("import", node, "star import")
            else:
                self.check_attribute_name(node, alias.name)
            self.check_name(node, alias.asname or alias.name)

    def visit_Name(self, node: ast.Name) -> None:
        self.check_name(node, node.id)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        self.check_attribute_name(node, node.attr)
        if not isinstance(node.ctx, ast.Load):
            self.flag("attribute-store", node, f"assigning or deleting attribute '{node.attr}'")
        self.generic_visit(node)

    def visit_arg(self, node: ast.arg) -> None:
        self.check_name(node, node.arg)
        self.generic_visit(node)

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        self.check_name(node, node.name)
        self.generic_visit(node)

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        self.check_name(node, node.name)
        self.generic_visit(node)

    def visit_Constant(self, node: ast.Constant) -> None:
        if isinstance(node.value, str) and "__" in node.value:
            self.flag("dunder", node, "string constant containing '__'")

    def visit_keyword(self, node: ast.keyword) -> None:
        if node.arg is not None:
            self.check_name(node, node.arg)
        self.generic_visit(node)

    def visit_Global(self, node: ast.Global) -> None:
        self.flag("top-level", node, "'global' statement")

    def visit_AsyncFunctionDef(self, node: ast.AsyncFunctionDef) -> None:
        self.flag("top-level", node, "async function")


def _check_top_level(tree: ast.Module) -> list[Violation]:
    violations = []
    for index, stmt in enumerate(tree.body):
        is_docstring = (
            index == 0 and isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant)
        )
        allowed = (
            is_docstring
            or isinstance(stmt, ast.Import | ast.ImportFrom | ast.FunctionDef)
            or (
                isinstance(stmt, ast.Assign)
                and all(isinstance(t, ast.Name) for t in stmt.targets)
                and _is_constant_expr(stmt.value)
            )
            or (
                isinstance(stmt, ast.AnnAssign)
                and isinstance(stmt.target, ast.Name)
                and stmt.value is not None
                and _is_constant_expr(stmt.value)
            )
        )
        if not allowed:
            violations.append(
                Violation(
                    "top-level",
                    stmt.lineno,
                    f"module-level {type(stmt).__name__} (only imports, defs, constants)",
                )
            )
    return violations


def _check_required_functions(tree: ast.Module) -> list[Violation]:
    functions = {stmt.name: stmt for stmt in tree.body if isinstance(stmt, ast.FunctionDef)}
    violations = [Violation("missing-function", 0, f"no module-level function '{name}'")
                  for name in REQUIRED_FUNCTIONS if name not in functions]
    for name in (*REQUIRED_FUNCTIONS, *OPTIONAL_FUNCTIONS):
        fn, arity = functions.get(name), FUNCTION_ARITY[name]
        if fn is None:
            continue
        args = fn.args
        positional = len(args.posonlyargs) + len(args.args)
        if positional != arity or args.vararg or args.kwarg or args.kwonlyargs:
            count = "one positional parameter" if arity == 1 else f"{arity} positional parameters"
            violations.append(Violation("signature", fn.lineno, f"'{name}' must take exactly {count}"))
    return violations


_PARSE_LOCK = threading.Lock()


def parse_python(source: str, filename: str = "<unknown>") -> ast.Module:
    """`ast.parse`, one thread at a time: CPython 3.11's AST conversion keeps its recursion
    depth in shared state, and parallel parses (a generation's drafts are checked on
    several threads) fail with "SystemError: AST constructor recursion depth mismatch"."""
    with _PARSE_LOCK:
        return ast.parse(source, filename=filename)


def static_check(source: str) -> list[Violation]:
    """Check a candidate module against the contract; an empty list means it passes."""
    if not isinstance(source, str):
        return [Violation("syntax", 0, f"source must be str, got {type(source).__name__}")]
    if len(source) > MAX_SOURCE_CHARS:
        return [Violation("size", 0, f"{len(source)} characters > limit {MAX_SOURCE_CHARS}")]
    try:
        tree = parse_python(source, filename=CANDIDATE_FILE)
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        line = getattr(exc, "lineno", None) or 0
        return [Violation("syntax", line, f"{type(exc).__name__}: {exc}".splitlines()[0])]
    checker = _Checker()
    checker.visit(tree)
    return checker.violations + _check_top_level(tree) + _check_required_functions(tree)
