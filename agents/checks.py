"""The critic's deterministic checks: the contract's static check plus rules an LLM misses.

Extra rules (each `Violation.rule`), on top of `training.contract.static_check`:
- `oef-globals`: `enhance_observation` reads a name that is not its `obs` argument, one
  of its locals, an imported module, a safe builtin, an immutable module constant, or a
  module function that obeys the same rule (CTDE: execution sees one agent's obs only).
- `oef-mutates-obs`: the OEF writes into `obs` (assignment or in-place `x.op_()`), which
  would fake the "first D columns equal obs" check and corrupt the caller's tensor.
- `module-state`: a mutable module constant (list/dict/set) or a `nonlocal` statement:
  state that survives between calls makes rewards depend on call history.
- `reward-hacking`: reading the evaluator, metrics, fitness or the policy, or writing into
  `ctx` tensors in place.
- `ctx-field`: a `ctx` attribute, or a constant `ctx.state[...]` key, that does not exist
  (a small model's usual slip, `ctx.agent_pos`): an honest mistake sent back for revision,
  with the fields that do exist named in the message.
- `reward-scale`: a literal of magnitude >= 1e3 or an infinity in `hybrid_reward`;
  rewards that large swamp the native reward and destabilise value learning.
"""

from __future__ import annotations

import ast
import builtins

from lero.agents.records import Problem
from lero.training.contract import Violation, parse_python, static_check

CTX_FIELDS = frozenset({"obs", "next_obs", "actions", "env_reward", "state", "step", "progress"})
# Free names / attributes that can only mean the trusted evaluation or the learner.
EVALUATOR_NAMES = frozenset({"evaluate", "evaluator", "fitness", "metrics", "policy", "reflection"})
SAFE_BUILTINS = frozenset(
    {
        "abs", "all", "any", "bool", "dict", "enumerate", "float", "int", "len", "list", "max",
        "min", "range", "reversed", "round", "set", "sorted", "sum", "tuple", "zip", "slice",
        "isinstance", "ValueError", "RuntimeError", "True", "False", "None",
    }
)  # fmt: skip
MAX_LITERAL = 1e3
MUTABLE_NODES = (ast.List, ast.Dict, ast.Set, ast.ListComp, ast.DictComp, ast.SetComp, ast.Call)


def state_names(problem: Problem) -> tuple[str, ...]:
    """The env's `ctx.state` keys."""
    return tuple(f.name for f in problem.task_spec.state_fields)


def ctx_fields_text(state_fields: tuple[str, ...] = ()) -> str:
    """The fields a candidate may read, in one line (static-check messages, debugger prompt)."""
    line = "ctx has " + ", ".join(f"ctx.{name}" for name in sorted(CTX_FIELDS))
    if state_fields:
        line += "; ctx.state has " + ", ".join(f"ctx.state[{name!r}]" for name in state_fields)
    return line


def check_candidate(source: str, state_fields: tuple[str, ...] = ()) -> list[Violation]:
    """All violations of `source`: the contract's static check, then the critic's rules.
    `state_fields` names the env's `ctx.state` keys (unchecked when empty)."""
    violations = static_check(source)
    if any(v.rule in ("syntax", "size") for v in violations):
        return violations
    tree = parse_python(source)
    extra = [*_module_state(tree), *_reward_rules(tree, state_fields), *_oef_rules(tree)]
    unique = dict.fromkeys([*violations, *extra])
    return sorted(unique, key=lambda v: v.line)


def _module_state(tree: ast.Module) -> list[Violation]:
    found = []
    for stmt in tree.body:
        if isinstance(stmt, ast.Assign | ast.AnnAssign) and _mutable(stmt.value):
            found.append(
                Violation(
                    "module-state",
                    stmt.lineno,
                    "module-level mutable value (use a tuple or a local)",
                )
            )
    for node in ast.walk(tree):
        if isinstance(node, ast.Nonlocal):
            found.append(
                Violation("module-state", node.lineno, "'nonlocal' state shared between calls")
            )
    return found


def _mutable(value: ast.expr | None) -> bool:
    return value is not None and any(isinstance(node, MUTABLE_NODES) for node in ast.walk(value))


def _reward_rules(tree: ast.Module, state_fields: tuple[str, ...]) -> list[Violation]:
    found = []
    hrf = _function(tree, "hybrid_reward")
    ctx_names = {"ctx"} | ({hrf.args.args[0].arg} if hrf and hrf.args.args else set())
    module_bound = _bound_names(tree)  # a local called `metrics` is not the evaluator's
    for node in ast.walk(tree):
        reads_ctx = (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id in ctx_names
        )
        if reads_ctx and node.attr not in CTX_FIELDS and node.attr not in EVALUATOR_NAMES:
            found.append(
                Violation(
                    "ctx-field",
                    node.lineno,
                    f"ctx.{node.attr} does not exist; {ctx_fields_text(state_fields)}",
                )
            )
        key = _state_key(node, ctx_names)
        if state_fields and key is not None and key not in state_fields:
            found.append(
                Violation(
                    "ctx-field",
                    node.lineno,
                    f"ctx.state[{key!r}] does not exist; {ctx_fields_text(state_fields)}",
                )
            )
        free_name = isinstance(node, ast.Name) and node.id not in module_bound
        name = node.id if free_name else getattr(node, "attr", None)
        if name in EVALUATOR_NAMES:
            found.append(
                Violation(
                    "reward-hacking", node.lineno, f"'{name}' refers to the evaluator, not the task"
                )
            )
        if any(_writes_into(node, name) for name in ctx_names):
            found.append(
                Violation("reward-hacking", node.lineno, "writes into ctx (it is read-only)")
            )
    for node in ast.walk(hrf) if hrf else ():
        number = isinstance(node, ast.Constant) and type(node.value) in (int, float)
        if number and abs(node.value) >= MAX_LITERAL:
            found.append(
                Violation(
                    "reward-scale",
                    node.lineno,
                    f"literal {node.value!r} in hybrid_reward; keep reward terms near unit scale",
                )
            )
        infinite = (isinstance(node, ast.Attribute) and node.attr == "inf") or (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and node.value.strip("+-").lower() == "inf"
        )
        if infinite:
            found.append(Violation("reward-scale", node.lineno, "infinite value in hybrid_reward"))
    return found


def _state_key(node: ast.AST, ctx_names: set[str]) -> str | None:
    """`"x"` of `ctx.state["x"]` (a constant key), else None."""
    if not (isinstance(node, ast.Subscript) and isinstance(node.value, ast.Attribute)):
        return None
    owner = node.value
    if not (owner.attr == "state" and isinstance(owner.value, ast.Name) and owner.value.id in ctx_names):
        return None
    key = node.slice
    return key.value if isinstance(key, ast.Constant) and isinstance(key.value, str) else None


def _oef_rules(tree: ast.Module) -> list[Violation]:
    oef = _function(tree, "enhance_observation")
    if oef is None:
        return []
    modules = _imported_names(tree)
    constants = {
        target.id
        for stmt in tree.body
        if isinstance(stmt, ast.Assign) and not _mutable(stmt.value)
        for target in stmt.targets
        if isinstance(target, ast.Name)
    }
    functions = {stmt.name: stmt for stmt in tree.body if isinstance(stmt, ast.FunctionDef)}
    found: list[Violation] = []
    pending, seen = [oef], set()
    while pending:
        fn = pending.pop()
        if fn.name in seen:
            continue
        seen.add(fn.name)
        known = _bound_names(fn) | modules | constants | SAFE_BUILTINS
        for node in ast.walk(fn):
            if (
                isinstance(node, ast.Name)
                and isinstance(node.ctx, ast.Load)
                and node.id not in known
            ):
                if node.id in functions:
                    pending.append(functions[node.id])
                elif node.id not in dir(builtins):
                    found.append(
                        Violation(
                            "oef-globals",
                            node.lineno,
                            f"enhance_observation uses '{node.id}'; it may use only its obs argument",
                        )
                    )
                else:
                    found.append(
                        Violation(
                            "oef-globals",
                            node.lineno,
                            f"builtin '{node.id}' is not allowed in enhance_observation",
                        )
                    )
        param = fn.args.args[0].arg if fn is oef and fn.args.args else None
        if param and any(_writes_into(node, param) for node in ast.walk(fn)):
            found.append(
                Violation(
                    "oef-mutates-obs",
                    fn.lineno,
                    f"enhance_observation modifies '{param}' in place; build a new tensor",
                )
            )
    return found


def _function(tree: ast.Module, name: str) -> ast.FunctionDef | None:
    return next((s for s in tree.body if isinstance(s, ast.FunctionDef) and s.name == name), None)


def _imported_names(tree: ast.Module) -> set[str]:
    names = set()
    for stmt in tree.body:
        if isinstance(stmt, ast.Import):
            names |= {alias.asname or alias.name.split(".")[0] for alias in stmt.names}
        elif isinstance(stmt, ast.ImportFrom):
            names |= {alias.asname or alias.name for alias in stmt.names}
    return names


def _bound_names(fn: ast.FunctionDef | ast.Module) -> set[str]:
    """Parameters and every name the function/module (or a nested scope in it) binds."""
    bound = set()
    for node in ast.walk(fn):
        if isinstance(node, ast.arg):
            bound.add(node.arg)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            bound.add(node.id)
        elif (isinstance(node, ast.FunctionDef) and node is not fn) or (
            isinstance(node, ast.ExceptHandler) and node.name
        ):
            bound.add(node.name)
    return bound


def _root_name(node: ast.expr) -> str | None:
    """`ctx` for `ctx.state["x"][0].sum()`-like chains."""
    while isinstance(node, ast.Attribute | ast.Subscript | ast.Call):
        node = node.func if isinstance(node, ast.Call) else node.value
    return node.id if isinstance(node, ast.Name) else None


def _writes_into(node: ast.AST, root: str) -> bool:
    """An assignment to `root[...]`/`root.x`, or an in-place `op_()` call on a `root` chain."""
    if isinstance(node, ast.Assign | ast.AugAssign | ast.AnnAssign):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        return any(
            isinstance(t, ast.Subscript | ast.Attribute) and _root_name(t) == root for t in targets
        )
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        method = node.func.attr
        in_place = method.endswith("_") and not method.endswith("__")
        return in_place and _root_name(node.func.value) == root
    return False
