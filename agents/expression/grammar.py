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
from lero.agents.expression.gbnf import longest_sentence
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

MAX_NESTING = 4  # brackets and calls one expression may nest in the grammar (the parser's own bound: 40)
MAX_OPERANDS = 4  # terms of one sum, factors of one product, at each level of nesting
# per nesting depth, from the top: (terms of a sum, factors of a product, whether its atoms may
# branch: where(c, a, b) and a comparison in brackets hold several values, the rest one)
Shape = tuple[tuple[int, int, bool], ...]
FULL: Shape = ((MAX_OPERANDS, MAX_OPERANDS, True),) * (MAX_NESTING + 1)
ATOM: Shape = ((1, 1, False),)  # a single leaf: the narrowest shape

COMMON = r'''name ::= [a-z] [a-z0-9_]? [a-z0-9_]? [a-z0-9_]? [a-z0-9_]? [a-z0-9_]? [a-z0-9_]? [a-z0-9_]? [a-z0-9_]? [a-z0-9_]? [a-z0-9_]? [a-z0-9_]?
num ::= [0-9] [0-9]? [0-9]? ("." [0-9] [0-9]? [0-9]?)?
weight ::= "100" | [0-9] [0-9]? ("." [0-9] [0-9]?)?
signed ::= "-"? num
addop ::= " + " | " - "
mulop ::= " * " | " / "
cmpop ::= " < " | " > " | " <= " | " >= "'''


def rule(scope: str, dims: Dims, part: str = "", depth: int = 0) -> str:
    """A rule name: `reward-L-xy-prod`; `scalar` for no dims; `n2` for a value nested in 2
    brackets or calls."""
    return "-".join([scope, *(dims or ("scalar",)), *([f"n{depth}"] if depth else []), *([part] if part else [])])


def _literal(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _alternatives(options: list[str]) -> str:
    return " | ".join(options)


def _up_to(more: str, operands: int) -> str:
    """`operands` - 1 optional MORE: a sum or product of at most `operands` operands."""
    return f" {more}?" * (operands - 1)


def _reductions(types: list[Dims]) -> dict[Dims, list[tuple[Dims, str]]]:
    """For each dims, the (wider dims, dim) pairs a reduction takes it from."""
    return {dims: [(wider, dim) for wider in types for k, dim in enumerate(wider) if wider[:k] + wider[k + 1:] == dims]
            for dims in types}


def expression_rules(task: Problem, scope: str, inputs: dict[str, Input] | None = None,
                     shape: Shape = FULL) -> list[str]:
    """The rules of `scope`'s expressions; `rule(scope, ())` is one number per agent.

    Brackets and calls nest at most `len(shape) - 1` deep, each level its own rules: the grammar
    has no recursion, so a server's sampler never follows an unbounded nest (llama.cpp keeps a
    stack for every way a prefix may still parse; typed rules share prefixes, so each open
    bracket multiplied them, and a 135M model's run of brackets took minutes per token). A sum
    or product has at most the operands `shape` gives its depth and nothing repeats (`*`,
    `+`), so every sentence ends: a small model's endless `+ max(...) + max(...)` ran its
    repair replies to max_tokens, cut off and unparseable."""
    inputs = inputs if inputs is not None else task_inputs(task)
    types = scope_types(inputs, scope)
    leaves = {dims: [_literal(i.name) for i in inputs.values() if scope in i.scopes and i.dims == dims] for dims in types}
    leaves[()].append("num")
    if task.obs_dim <= MAX_ENUMERATED_COLUMNS:
        leaves[()].append('"obs[" (' + _alternatives([_literal(str(c)) for c in range(task.obs_dim)]) + ') "]"')
    reductions = _reductions(types)
    # the dims a value at each depth can have: a leaf, or one more level of nesting (none past the shape's)
    live: list[set[Dims]] = [set() for _ in range(len(shape) + 1)]
    for depth in reversed(range(len(shape))):
        deeper = live[depth + 1]
        live[depth] = {d for d in types if leaves[d] or d in deeper or any(w in deeper for w, _ in reductions[d])}
    calls = _alternatives([_literal(r) for r in REDUCTIONS])
    lines = []
    for depth, (terms, factors, wide) in enumerate(shape):
        dims_here, inner = live[depth], live[depth + 1]
        for dims in (d for d in types if d in dims_here):
            suffixes = [d for d in types if d in dims_here and len(d) <= len(dims) and dims[len(dims) - len(d):] == d]
            rhs = {part: _alternatives([rule(scope, d, part, depth) for d in suffixes]) for part in ("prod", "un")}
            atoms = list(leaves[dims])
            if dims in inner:
                value, cmp = rule(scope, dims, "", depth + 1), rule(scope, dims, "cmp", depth + 1)
                atoms += [f'"(" {value} (cmpop {value})? ")"' if wide else f'"(" {value} ")"', f'"exp(" {value} ")"',
                          f'"clamp(" {value} ", " signed ", " signed ")"']
                atoms += [f'"where(" {cmp} ", " {value} ", " {value} ")"'] * wide
            atoms += [f'({calls}) "(" {rule(scope, wider, "", depth + 1)} ", " {_literal(dim)} ")"'
                      for wider, dim in reductions[dims] if wider in inner]
            more = {part: rule(scope, dims, f"{part}-more", depth) for part in ("prod", "un")}
            lines += [f"{rule(scope, dims, '', depth)} ::= {rule(scope, dims, 'prod', depth)}{_up_to(more['prod'], terms)}",
                      f"{rule(scope, dims, 'prod', depth)} ::= {rule(scope, dims, 'un', depth)}{_up_to(more['un'], factors)}",
                      f'{rule(scope, dims, "un", depth)} ::= "-" {rule(scope, dims, "atom", depth)} | '
                      f'{rule(scope, dims, "atom", depth)}',
                      f"{rule(scope, dims, 'atom', depth)} ::= {_alternatives(atoms)}"]
            lines += [f"{more['prod']} ::= addop ({rhs['prod']})"] * (terms > 1)
            lines += [f"{more['un']} ::= mulop ({rhs['un']})"] * (factors > 1)
            if depth and shape[depth - 1][2]:  # a comparison is where()'s first argument: one level in
                lines.append(f"{rule(scope, dims, 'cmp', depth)} ::= {rule(scope, dims, '', depth)} cmpop "
                             f"{rule(scope, dims, '', depth)}")
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


def repair_grammar(task: Problem, slots: list[Slot], max_chars: int | None = None) -> str:
    """The GBNF grammar of the debugger's reply: one of `slots`' lines, its prefix as it is
    (the slot, its weight and schedule) and a new expression of the slot's scope.

    With `max_chars` (the reply's max_tokens: a token of this ASCII grammar is at least one
    character) the expression's shape narrows (`narrower`) until no sentence is longer, so a
    constrained reply ends before the server cuts it off: SmolLM2's repairs nested four
    operands a level until max_tokens, and a cut-off line does not parse."""
    scopes = list(dict.fromkeys(slot_scope(s.kind) for s in slots))
    root = " | ".join(f"{_literal(s.prefix())} {rule(slot_scope(s.kind), ())}" for s in slots)
    inputs = task_inputs(task)
    shape = FULL
    while True:
        grammar = "\n".join([f"root ::= ({root})", COMMON,
                             *(r for scope in scopes for r in expression_rules(task, scope, inputs, shape))]) + "\n"
        if max_chars is None or shape == ATOM or longest_sentence(grammar) <= max_chars:
            return grammar
        shape = narrower(shape)


def narrower(shape: Shape) -> Shape:
    """One step less. Branching goes first, deepest level first (a where() holds four values,
    so each wide level multiplies the longest sentence by four); then the level with the
    most operands loses one (a factor before a term, the outer level on ties, so a nested
    `norm(a - b, xy)` keeps its two terms); a level of one operand goes last, deepest first,
    so nesting is what a tight bound keeps longest."""
    levels = list(shape)
    if wide := [d for d, level in enumerate(levels) if level[2]]:
        terms, factors, _ = levels[wide[-1]]
        levels[wide[-1]] = (terms, factors, False)
    elif any(level[:2] != (1, 1) for level in levels):
        d = max(range(len(levels)), key=lambda k: (levels[k][0] * levels[k][1], -k))
        terms, factors, _ = levels[d]
        levels[d] = (terms, factors - 1, False) if factors >= terms else (terms - 1, factors, False)
    else:
        levels.pop()
    return tuple(levels)
