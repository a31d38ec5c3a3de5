"""Random sentences of a GBNF grammar (the subset lero writes: literals, character classes,
rule references, groups, alternatives, `?`, `*`, `+`), for tests of a derived grammar.

Past `depth` nested rules, each choice takes an alternative that ends soonest (the fewest
nested rules to a sentence), so every draw terminates.
"""

from __future__ import annotations

import random
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


class Sentences:
    """Draws sentences of `rules` from `start`."""

    def __init__(self, grammar: str, seed: int, depth: int = 8):
        self.rules = parse_gbnf(grammar)
        self.rng, self.depth = random.Random(seed), depth
        self.cost = self._costs()

    def _costs(self) -> dict[str, float]:
        """Each rule's fewest nested rules to a sentence (fixed point)."""
        cost = dict.fromkeys(self.rules, float("inf"))
        for _ in range(len(self.rules) + 2):
            for name, alts in self.rules.items():
                cost[name] = min(cost[name], min(self._alt_cost(a, cost) for a in alts) + 1)
        return cost

    def _alt_cost(self, alt: list[Item], cost: dict[str, float]) -> float:
        total = 0.0
        for kind, value, postfix in alt:
            if postfix in ("?", "*"):
                continue
            if kind == "ref":
                total = max(total, cost[value])
            elif kind == "group":
                total = max(total, min(self._alt_cost(a, cost) for a in value))
        return total

    def draw(self, start: str = "root") -> str:
        return self._rule(start, 0)

    def _rule(self, name: str, level: int) -> str:
        return self._choose(self.rules[name], level + 1)

    def _choose(self, alts: list[list[Item]], level: int) -> str:
        if level > self.depth:
            best = min(self._alt_cost(a, self.cost) for a in alts)
            alts = [a for a in alts if self._alt_cost(a, self.cost) == best]
        return "".join(self._item(item, level) for item in self.rng.choice(alts))

    def _item(self, item: Item, level: int) -> str:
        kind, value, postfix = item
        repeats = {"": 1, "?": self.rng.randint(0, 1), "*": self.rng.randint(0, 2), "+": self.rng.randint(1, 2)}[postfix]
        if level > self.depth and postfix in ("?", "*"):
            repeats = 0
        out = []
        for _ in range(repeats):
            if kind == "lit":
                out.append(value)
            elif kind == "class":
                out.append(self.rng.choice(value))
            elif kind == "ref":
                out.append(self._rule(value, level))
            else:
                out.append(self._choose(value, level))
        return "".join(out)
