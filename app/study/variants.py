"""The four study variants of one candidate module: native, HRF only, OEF only, both;
any of them at K times the study's steps (`<variant>@<K>x`: `hrf+oef@10x` asks whether the
candidate's edge lasts at the budget a researcher trains at), and `native@loop` (native
trained for the env steps the candidate's whole run spent). `native@<K>x` and `native@loop`
are the equal-compute arms: native trained longer.

A variant switches one of the candidate's functions off by replacing its definition in
the source text with the native one (the environment's reward, or the raw observation).
The result still defines both functions, so it passes the same static check and runs in
the same sandbox as the candidate itself; nothing of the candidate is executed here.
"""

from __future__ import annotations

import ast
import re

from lero.graph.confirmation import LOOP_ARM  # the arm's definition lives with the confirmation
from lero.training.contract import parse_python

VARIANTS = ("native", "hrf", "oef", "hrf+oef")

NATIVE_REWARD = '''def hybrid_reward(ctx):
    """Study variant: the candidate's reward is switched off; the native reward trains."""
    return ctx.env_reward, {}
'''
RAW_OBSERVATION = '''def enhance_observation(obs):
    """Study variant: the candidate's observation enhancement is switched off."""
    return obs
'''
_NATIVE = {"hybrid_reward": NATIVE_REWARD, "enhance_observation": RAW_OBSERVATION}
_KEEPS = {"hrf": "hybrid_reward", "oef": "enhance_observation"}
_TIMES_ARM = re.compile(r"^(native|hrf|oef|hrf\+oef)@([1-9][0-9]{0,3})x$")


def step_multiple(arm: str) -> int | None:
    """K of a `<variant>@<K>x` arm, else None."""
    match = _TIMES_ARM.match(arm)
    return int(match.group(2)) if match else None


def base_variant(arm: str) -> str:
    """The variant ARM trains (`hrf+oef@10x` -> `hrf+oef`, `native@loop` -> `native`)."""
    return "native" if arm == LOOP_ARM else arm.partition("@")[0]


def is_equal_compute(arm: str) -> bool:
    """Whether ARM is native trained with more steps than the study's."""
    return arm != "native" and base_variant(arm) == "native"


def same_budget_native(arm: str) -> str | None:
    """The native arm at ARM's budget, which ARM is tested against (`hrf@10x` -> `native@10x`);
    None for the native arms themselves."""
    if base_variant(arm) == "native":
        return None
    times = step_multiple(arm)
    return "native" if times is None else f"native@{times}x"


def check_arm(arm: str) -> None:
    """ValueError unless ARM is a variant, a variant at K times the steps, or native@loop."""
    if arm not in VARIANTS and arm != LOOP_ARM and step_multiple(arm) is None:
        raise ValueError(f"unknown arm {arm!r}; choose from {', '.join(VARIANTS)}, any of them as "
                         f"<variant>@<K>x (K >= 1), {LOOP_ARM}")


def _replace_function(source: str, name: str, replacement: str) -> str:
    """SOURCE with the module-level `def NAME` (decorators included) replaced by REPLACEMENT."""
    try:
        tree = parse_python(source)
    except SyntaxError as error:
        raise ValueError(f"the candidate does not parse: {error.msg} (line {error.lineno})") from None
    found = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == name]
    if len(found) != 1:
        raise ValueError(f"the candidate must define {name}() once at module level")
    node = found[0]
    start = min([node.lineno, *(d.lineno for d in node.decorator_list)]) - 1
    lines = source.splitlines(keepends=True)
    return "".join([*lines[:start], replacement, *lines[node.end_lineno :]])


def variant_code(source: str, variant: str) -> str | None:
    """The module trained for VARIANT or arm (None = native: the sandbox's baseline, no candidate code)."""
    check_arm(variant)
    variant = base_variant(variant)
    if variant == "native":
        return None
    if variant == "hrf+oef":
        return source
    dropped = next(name for name in _NATIVE if name != _KEEPS[variant])
    return _replace_function(source, dropped, _NATIVE[dropped])
