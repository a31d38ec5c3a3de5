"""Static type and shape check of an expression, which also yields its torch source.

Dims broadcast from the right, as torch does (a shorter operand's dims must end the longer
one's: `landmark_pos - own(agent_pos)` is ("L", "xy")); lero inserts the axes the shorter
operand lacks, so the leading agent dims never meet another operand's named ones. A
reduction names the dim it removes. What a scope may read is the inputs' declaration
(`types.Input.scopes`); a number, `progress` and what is made of them alone are scalars.
"""

from __future__ import annotations

from dataclasses import dataclass

from lero.agents.expression.parse import (
    COMPARISONS,
    Binary,
    Call,
    Column,
    ExpressionError,
    Name,
    Neg,
    Node,
    Num,
    parse,
)
from lero.agents.expression.readable import Dims, Input, obs_column

WHY_NOT = {  # scope -> why a name outside it may not be read there
    "feature": "which the agent cannot observe (an observation feature reads only the agent's own observation)",
    "potential": "which a potential cannot read (it is a function of one state: no env_reward, step or progress)",
    "reward": "which a reward term cannot read",
}
REDUCE_CODE = {"norm": "torch.linalg.vector_norm({x}, dim={k})", "min": "{x}.min(dim={k}).values",
               "max": "{x}.max(dim={k}).values", "mean": "{x}.mean(dim={k})", "sum": "{x}.sum(dim={k})"}


@dataclass(frozen=True)
class Typed:
    """A checked (sub)expression: its torch source, its named dims, and whether it is a plain
    scalar (a number or `progress`: no leading agent dims, so it broadcasts as it is)."""

    code: str
    dims: Dims
    scalar: bool = False


def broadcast(a: Dims, b: Dims) -> Dims:
    """The dims of `a (op) b`: the longer, when the shorter ends it."""
    longer, shorter = (a, b) if len(a) >= len(b) else (b, a)
    if longer[len(longer) - len(shorter):] != shorter:
        raise ExpressionError(f"cannot combine dims {_show(a)} with {_show(b)} (they must end alike)")
    return longer


def lifted(value: Typed, dims: Dims) -> str:
    """`value`'s source with the axes `dims` has before it inserted (a scalar needs none)."""
    code = value.code
    if value.scalar:
        return code
    for _ in range(len(dims) - len(value.dims)):
        code = f"({code}).unsqueeze({-len(value.dims) - 1})"
    return code


class Checker:
    """Checks expressions of one scope against a task's inputs."""

    def __init__(self, inputs: dict[str, Input], scope: str, obs_dim: int):
        self.inputs, self.scope, self.obs_dim = inputs, scope, obs_dim

    def check(self, text: str) -> Typed:
        """The expression as a per-agent value with no dims left (what a term, a potential and
        a feature are); ExpressionError says why not."""
        value = self.node(parse(text))
        if value.dims:
            raise ExpressionError(f"its value has dims {_show(value.dims)}: reduce them (norm, min, max, mean, sum) "
                                  "to one number per agent")
        return value

    def node(self, node: Node) -> Typed:
        if isinstance(node, Num):
            return Typed(repr(float(node.value)), (), scalar=True)
        if isinstance(node, Name):
            return self.name(node.name)
        if isinstance(node, Column):
            if not 0 <= node.index < self.obs_dim:
                raise ExpressionError(f"obs[{node.index}] is outside the observation's {self.obs_dim} columns")
            return Typed(obs_column(self.scope, node.index), ())
        if isinstance(node, Neg):
            arg = self.node(node.arg)
            return Typed(f"(-{arg.code})", arg.dims, arg.scalar)
        if isinstance(node, Binary):
            return self.binary(node)
        return self.call(node)

    def name(self, name: str) -> Typed:
        found = self.inputs.get(name)
        if found is None:
            raise ExpressionError(f"unknown name {name}; known: {', '.join(self.inputs)}")
        if self.scope not in found.scopes:
            raise ExpressionError(f"reads {name}, {WHY_NOT[self.scope]}")
        return Typed(found.code[self.scope], found.dims, scalar=name == "progress")

    def binary(self, node: Binary) -> Typed:
        left, right = self.node(node.left), self.node(node.right)
        dims = broadcast(left.dims, right.dims)
        code = f"({lifted(left, dims)} {node.op} {lifted(right, dims)})"
        if node.op in COMPARISONS:
            code = f"torch.as_tensor{code}.float()"
            return Typed(code, dims)
        return Typed(code, dims, left.scalar and right.scalar)

    def call(self, node: Call) -> Typed:
        if node.dim is not None:
            arg = self.node(node.args[0])
            if node.dim not in arg.dims:
                raise ExpressionError(f"{node.fn}(..., {node.dim}): its argument has dims {_show(arg.dims)}")
            k = arg.dims.index(node.dim) - len(arg.dims)
            rest = arg.dims[:k + len(arg.dims)] + arg.dims[k + len(arg.dims) + 1:]
            return Typed(REDUCE_CODE[node.fn].format(x=arg.code, k=k), rest)
        if node.fn == "exp":
            arg = self.node(node.args[0])
            return Typed(f"torch.exp(torch.as_tensor({arg.code}))", arg.dims, arg.scalar)
        if node.fn == "clamp":
            arg = self.node(node.args[0])
            low, high = sorted(node.bounds or (0.0, 0.0))  # between the two bounds, in either order
            return Typed(f"torch.clamp(torch.as_tensor({arg.code}), {low!r}, {high!r})", arg.dims, arg.scalar)
        condition, a, b = (self.node(arg) for arg in node.args)
        if not (isinstance(node.args[0], Binary) and node.args[0].op in COMPARISONS):
            raise ExpressionError("where(...) takes a comparison first (a < b, a >= b, ...)")
        dims = broadcast(broadcast(condition.dims, a.dims), b.dims)
        cond = f"({lifted(condition, dims)} > 0.5)"
        return Typed(f"torch.where({cond}, torch.as_tensor({lifted(a, dims)}), torch.as_tensor({lifted(b, dims)}))", dims)


def _show(dims: Dims) -> str:
    return f"({', '.join(dims)})" if dims else "() (one number per agent)"
