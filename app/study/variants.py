"""The four study variants of one candidate module: native, HRF only, OEF only, both.

A variant switches one of the candidate's functions off by replacing its definition in
the source text with the native one (the environment's reward, or the raw observation).
The result still defines both functions, so it passes the same static check and runs in
the same sandbox as the candidate itself; nothing of the candidate is executed here.
"""

from __future__ import annotations

import ast

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
    """The module trained for VARIANT (None = native: the sandbox's baseline, no candidate code)."""
    if variant not in VARIANTS:
        raise ValueError(f"unknown variant {variant!r}; choose from {', '.join(VARIANTS)}")
    if variant == "native":
        return None
    if variant == "hrf+oef":
        return source
    dropped = next(name for name in _NATIVE if name != _KEEPS[variant])
    return _replace_function(source, dropped, _NATIVE[dropped])
