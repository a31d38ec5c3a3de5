"""The GBNF grammar of a task's expression designs, which a server constrains decoding to.

It is typed: a rule per scope (reward, potential, feature) and per dims the scope's values
may have (`types.scope_types`), so a sentence of it only combines dims that broadcast,
reduces only dims its argument has, reads only what its scope may read (an observation
feature: the agent's own observation alone), and ends with one number per agent. lero's
own check (`check.py`) accepts all of it and more; every reply is checked either way.
"""

from __future__ import annotations

from lero.agents.expression.expression_design import (
    MAX_FEATURES,
    MAX_TERMS,
    POTENTIAL,
    Slot,
    slot_scope,
)
from lero.agents.expression.parse import REDUCTIONS
from lero.agents.expression.readable import (
    MAX_ENUMERATED_COLUMNS,
    SCOPES,
    Dims,
    Input,
    scope_types,
    task_inputs,
)
from lero.agents.offline.genome import SCHEDULES
from lero.agents.records import Problem

COMMON = r'''name ::= [a-z] [a-z0-9_]? [a-z0-9_]? [a-z0-9_]? [a-z0-9_]? [a-z0-9_]? [a-z0-9_]? [a-z0-9_]? [a-z0-9_]? [a-z0-9_]? [a-z0-9_]? [a-z0-9_]?
num ::= [0-9] [0-9]? [0-9]? ("." [0-9] [0-9]? [0-9]?)?
weight ::= "100" | [0-9] [0-9]? ("." [0-9] [0-9]?)?
signed ::= "-"? num
addop ::= " + " | " - "
mulop ::= " * " | " / "
cmpop ::= " < " | " > " | " <= " | " >= "'''


def rule(scope: str, dims: Dims, part: str = "") -> str:
    """A rule name: `reward-L-xy-prod`; `scalar` for no dims."""
    return "-".join([scope, *(dims or ("scalar",)), *([part] if part else [])])


def _literal(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _alternatives(options: list[str]) -> str:
    return " | ".join(options)


def expression_rules(task: Problem, scope: str, inputs: dict[str, Input] | None = None) -> list[str]:
    """The rules of `scope`'s expressions; `rule(scope, ())` is one number per agent."""
    inputs = inputs if inputs is not None else task_inputs(task)
    types = scope_types(inputs, scope)
    lines = []
    for dims in types:
        suffixes = [d for d in types if len(d) <= len(dims) and dims[len(dims) - len(d):] == d]
        rhs = {part: _alternatives([rule(scope, d, part) for d in suffixes]) for part in ("prod", "un")}
        atoms = [_literal(i.name) for i in inputs.values() if scope in i.scopes and i.dims == dims]
        if not dims:
            atoms.append("num")
            if task.obs_dim <= MAX_ENUMERATED_COLUMNS:
                atoms.append('"obs[" (' + _alternatives([_literal(str(c)) for c in range(task.obs_dim)]) + ') "]"')
        atoms += [f'"(" {rule(scope, dims)} ")"', f'"(" {rule(scope, dims, "cmp")} ")"',
                  f'"exp(" {rule(scope, dims)} ")"', f'"clamp(" {rule(scope, dims)} ", " signed ", " signed ")"',
                  f'"where(" {rule(scope, dims, "cmp")} ", " {rule(scope, dims)} ", " {rule(scope, dims)} ")"']
        for wider in types:
            for k, dim in enumerate(wider):
                if wider[:k] + wider[k + 1:] == dims:
                    reductions = _alternatives([_literal(r) for r in REDUCTIONS])
                    atoms.append(f'({reductions}) "(" {rule(scope, wider)} ", " {_literal(dim)} ")"')
        lines += [f"{rule(scope, dims)} ::= {rule(scope, dims, 'prod')} (addop ({rhs['prod']}))*",
                  f"{rule(scope, dims, 'prod')} ::= {rule(scope, dims, 'un')} (mulop ({rhs['un']}))*",
                  f'{rule(scope, dims, "un")} ::= "-" {rule(scope, dims, "atom")} | {rule(scope, dims, "atom")}',
                  f"{rule(scope, dims, 'cmp')} ::= {rule(scope, dims)} cmpop {rule(scope, dims)}",
                  f"{rule(scope, dims, 'atom')} ::= {_alternatives(atoms)}"]
    return lines


def design_grammar(task: Problem) -> str:
    """The GBNF grammar of a whole design reply (design.py's lines, in order)."""
    schedule = _alternatives([_literal(s) for s in SCHEDULES])
    optional = [*(["term-line?"] * (MAX_TERMS - 1)), "potential-line?", *(["feature-line?"] * MAX_FEATURES)]
    lines = [f"root ::= term-line {' '.join(optional)}",
             f'term-line ::= "term " name ": " weight " " ({schedule}) " = " {rule("reward", ())} "\\n"',
             f'potential-line ::= "{POTENTIAL}: " weight " = " {rule(POTENTIAL, ())} "\\n"',
             f'feature-line ::= "feature " name " = " {rule("feature", ())} "\\n"', COMMON]
    inputs = task_inputs(task)
    for scope in SCOPES:
        lines += expression_rules(task, scope, inputs)
    return "\n".join(lines) + "\n"


def repair_grammar(task: Problem, slots: list[Slot]) -> str:
    """The GBNF grammar of the debugger's reply: one of `slots`' lines, its prefix as it is
    (the slot, its weight and schedule) and a new expression of the slot's scope."""
    scopes = list(dict.fromkeys(slot_scope(s.kind) for s in slots))
    root = " | ".join(f"{_literal(s.prefix())} {rule(slot_scope(s.kind), ())}" for s in slots)
    inputs = task_inputs(task)
    return "\n".join([f"root ::= ({root})", COMMON, *(r for scope in scopes for r in expression_rules(task, scope, inputs))]) + "\n"
