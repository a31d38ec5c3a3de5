"""GBNF grammars read back: the subset lero writes (literals, character classes, rule
references, groups, alternatives, `?`, `*`, `+`), parsed into rules, and the longest
sentence a rule allows, which bounds what a server constrained by it can write.
"""

from __future__ import annotations

import math
import re

Item = tuple  # ("lit", text) | ("class", chars) | ("ref", name) | ("group", alts) then a postfix in [2]
TOKEN = re.compile(r'\s*(?:"((?:[^"\\]|\\.)*)"|\[((?:[^\]\\]|\\.)*)\]|([A-Za-z0-9-]+)|(\(|\)|\||\?|\*|\+))')


def _chars(spec: str) -> list[str]:
    chars, at = [], 0
    while at < len(spec):
        if at + 2 < len(spec) and spec[at + 1] == "-":
            chars += [chr(c) for c in range(ord(spec[at]), ord(spec[at + 2]) + 1)]
            at += 3
        else:
            chars.append(spec[at])
            at += 1
    return chars


def parse_gbnf(text: str) -> dict[str, list[list[Item]]]:
    """Rule name -> alternatives, each a list of items `(kind, value, postfix)`."""
    rules = {}
    for line in text.splitlines():
        if "::=" not in line:
            continue
        name, body = (part.strip() for part in line.split("::=", 1))
        tokens = [m for m in TOKEN.finditer(body) if m.group(0).strip()]
        rules[name], _ = _alternatives(tokens, 0)
    return rules


def _alternatives(tokens: list, at: int) -> tuple[list[list[Item]], int]:
    alts: list[list[Item]] = [[]]
    while at < len(tokens):
        literal, cls, ref, punct = tokens[at].groups()
        if punct == ")":
            return alts, at + 1
        at += 1
        if punct == "|":
            alts.append([])
            continue
        if punct in ("?", "*", "+"):
            kind, value, _ = alts[-1][-1]
            alts[-1][-1] = (kind, value, punct)
            continue
        if punct == "(":
            inner, at = _alternatives(tokens, at)
            alts[-1].append(("group", inner, ""))
        elif literal is not None:
            alts[-1].append(("lit", bytes(literal, "utf-8").decode("unicode_escape"), ""))
        elif cls is not None:
            alts[-1].append(("class", _chars(cls), ""))
        else:
            alts[-1].append(("ref", ref, ""))
    return alts, at


def longest_sentence(grammar: str, start: str = "root") -> float:
    """The most characters a sentence of `start` can have: `inf` where a rule repeats (`*`,
    `+`) or refers back to itself, so a sentence may never end."""
    rules = parse_gbnf(grammar)
    known: dict[str, float] = {}
    open_rules: set[str] = set()

    def rule(name: str) -> float:
        if name in open_rules:
            return math.inf
        if name not in known:
            open_rules.add(name)
            known[name] = max(sequence(alt) for alt in rules[name])
            open_rules.discard(name)
        return known[name]

    def sequence(alt: list[Item]) -> float:
        return sum(item(*entry) for entry in alt)

    def item(kind: str, value, postfix: str) -> float:
        if postfix in ("*", "+"):
            return math.inf
        if kind == "lit":
            return len(value)
        if kind == "class":
            return 1
        if kind == "ref":
            return rule(value)
        return max(sequence(alt) for alt in value)

    return rule(start)
