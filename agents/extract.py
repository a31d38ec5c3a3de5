"""Pull the candidate module out of an LLM reply, however the model chose to format it.

Handles ```python / ```py / bare ``` / ~~~ fences, prose around them, several blocks
(the one defining the contract functions wins; split definitions are merged),
Windows line endings, tab indentation, an unterminated final fence, and replies
that are bare code. A reply with no code gives None. A reasoning model's `<think>`
sections (closed, or left open by a cut-off reply) are dropped first: the code sketched
while thinking is not the answer.
"""

from __future__ import annotations

import ast
import re
import textwrap
from dataclasses import dataclass

from lero.agents.records import Draft
from lero.training.contract import REQUIRED_FUNCTIONS, parse_python

PYTHON_TAGS = frozenset({"", "python", "py", "python3", "py3", "pycon"})
THINK = re.compile(r"<think>.*?(?:</think>|\Z)", re.DOTALL | re.IGNORECASE)
FENCE = re.compile(r"^[ \t]*(?P<fence>`{3,}|~{3,})[ \t]*(?P<tag>[\w+.-]*)[^\n`]*$")


@dataclass(frozen=True)
class Block:
    tag: str
    code: str


def without_thinking(reply: str) -> str:
    """`reply` without its `<think>...</think>` sections."""
    return THINK.sub("", reply)


def extract_code(reply: str) -> str | None:
    """The candidate module in `reply`, or None when the reply holds no code."""
    text = without_thinking(reply).replace("\r\n", "\n").replace("\r", "\n")
    blocks = [b for b in _fenced_blocks(text) if b.code.strip()]
    python_blocks = [b for b in blocks if b.tag.lower() in PYTHON_TAGS] or blocks
    if not python_blocks:
        bare = _normalise(text)
        return bare if _defines_any(bare) and _parses(bare) else None
    return _choose(python_blocks)


def _fenced_blocks(text: str) -> list[Block]:
    """Fenced blocks in order; a fence closes on the same character, at least as long."""
    blocks: list[Block] = []
    opening: re.Match[str] | None = None
    body: list[str] = []
    for line in text.split("\n"):
        match = FENCE.match(line)
        if opening is None:
            if match:
                opening, body = match, []
            continue
        fence = opening["fence"]
        closes = (
            match
            and not match["tag"]
            and match["fence"][0] == fence[0]
            and len(match["fence"]) >= len(fence)
        )
        if closes:
            blocks.append(Block(opening["tag"], "\n".join(body)))
            opening = None
        else:
            body.append(line)
    if opening is not None:  # unterminated final fence: the block runs to the end
        blocks.append(Block(opening["tag"], "\n".join(body)))
    return blocks


def _choose(blocks: list[Block]) -> str:
    """The last block defining both functions; else the defining blocks merged; else the longest."""
    codes = [_normalise(b.code) for b in blocks]
    complete = [c for c in codes if all(_defines(c, name) for name in REQUIRED_FUNCTIONS)]
    if complete:
        return complete[-1]
    defining = [c for c in codes if _defines_any(c)]
    if defining:
        return _merge([c for c in codes if c in defining or _only_setup(c)])
    return max(codes, key=len)


def _merge(codes: list[str]) -> str:
    """Concatenate blocks, keeping each import line once and the later of duplicate defs."""
    seen_imports: set[str] = set()
    kept: list[str] = []
    for index, code in enumerate(codes):
        later = "\n".join(codes[index + 1 :])
        lines = []
        for line in code.split("\n"):
            if re.match(r"^(import|from)\s", line):
                if line.strip() in seen_imports:
                    continue
                seen_imports.add(line.strip())
            lines.append(line)
        block = "\n".join(lines).strip()
        redefined = [n for n in REQUIRED_FUNCTIONS if _defines(block, n) and _defines(later, n)]
        if block and not redefined:
            kept.append(block)
    return "\n\n\n".join(kept) + "\n"


def _normalise(code: str) -> str:
    """Dedent, and turn tabs into spaces when that is what makes the code parse."""
    code = textwrap.dedent(code).strip("\n")
    if "\t" in code and not _parses(code):
        for width in (4, 8):
            expanded = textwrap.dedent(code.expandtabs(width))
            if _parses(expanded):
                code = expanded
                break
    return code.rstrip() + "\n"


def _defines(code: str, name: str) -> bool:
    return re.search(rf"^\s*def\s+{name}\s*\(", code, flags=re.MULTILINE) is not None


def _defines_any(code: str) -> bool:
    return any(_defines(code, name) for name in REQUIRED_FUNCTIONS)


def _only_setup(code: str) -> bool:
    """A block of imports, constants and helpers that a defining block may need."""
    try:
        tree = parse_python(code)
    except SyntaxError:
        return False
    return bool(tree.body) and all(_is_setup(node) for node in tree.body)


def _is_setup(node: ast.stmt) -> bool:
    """Imports, defs and literal constants; not example calls such as `r = hybrid_reward(ctx)`."""
    if isinstance(node, ast.Import | ast.ImportFrom | ast.FunctionDef):
        return True
    if isinstance(node, ast.Assign | ast.AnnAssign) and node.value is not None:
        try:
            ast.literal_eval(node.value)
        except ValueError:
            return False
        return True
    return False


def _parses(code: str) -> bool:
    try:
        parse_python(code)
    except SyntaxError:
        return False
    return True


CUT_OFF = "the reply was cut off at the token limit (finish_reason 'length') before its code was complete"


def draft_from_reply(reply: str, origin: str, cut_off: bool = False) -> Draft:
    """A Draft of the reply's module, or one with `error` set when the reply has no code, or
    was cut off (`cut_off`: the server stopped at max_tokens) before the code parsed."""
    code = extract_code(reply)
    if cut_off and (code is None or not _parses(code)):
        return Draft(code=None, reply=reply, error=CUT_OFF, origin=origin)
    if code is None:
        return Draft(
            code=None, reply=reply, error="the reply contains no Python code block", origin=origin
        )
    return Draft(code=code, reply=reply, error=None, origin=origin)
