"""Random sentences of a GBNF grammar (`agents.expression.gbnf` reads it), for tests of a
derived grammar.

Past `depth` nested rules, each choice takes an alternative that ends soonest (the fewest
nested rules to a sentence), so every draw terminates.
"""

from __future__ import annotations

import random

from lero.agents.expression.gbnf import Item, parse_gbnf


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


def accepts(grammar: str, text: str, start: str = "root") -> bool:
    """Whether `text` is a sentence of `start` (the grammar has no recursion: lero's never do)."""
    rules = parse_gbnf(grammar)
    memo: dict[tuple[str, int], frozenset[int]] = {}

    def rule(name: str, at: int) -> frozenset[int]:
        if (name, at) not in memo:
            memo[name, at] = frozenset().union(*(sequence(alt, at) for alt in rules[name]))
        return memo[name, at]

    def sequence(alt: list[Item], at: int) -> frozenset[int]:
        ends = frozenset({at})
        for entry in alt:
            ends = frozenset().union(*(item(*entry, p) for p in ends))
        return ends

    def item(kind: str, value, postfix: str, at: int) -> frozenset[int]:
        if kind == "lit":
            ends = frozenset({at + len(value)}) if text.startswith(value, at) else frozenset()
        elif kind == "class":
            ends = frozenset({at + 1}) if at < len(text) and text[at] in value else frozenset()
        elif kind == "ref":
            ends = rule(value, at)
        else:
            ends = frozenset().union(*(sequence(alt, at) for alt in value))
        return ends | {at} if postfix == "?" else ends

    return len(text) in rule(start, 0)
