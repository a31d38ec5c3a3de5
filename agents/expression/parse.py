"""The expression language's syntax: a tokenizer and a recursive-descent parser to a tree.

    expr    := sum (cmpop sum)?            cmpop: < > <= >=   (a comparison is 1.0 or 0.0)
    sum     := prod (("+" | "-") prod)*
    prod    := unary (("*" | "/") unary)*
    unary   := "-" unary | atom
    atom    := number | name | "own(" name ")" | "obs[" int "]" | "(" expr ")"
             | reduce "(" expr "," dim ")"     reduce: norm min max mean sum
             | "exp(" expr ")" | "clamp(" expr "," signed "," signed ")" | "where(" expr "," expr "," expr ")"

The grammar lero sends the model (`grammar.py`) is a typed subset of this one.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

REDUCTIONS = ("norm", "min", "max", "mean", "sum")
COMPARISONS = ("<=", ">=", "<", ">")
TOKEN = re.compile(r"\s*(?:(\d+(?:\.\d+)?)|([A-Za-z_]\w*)|(<=|>=|[-+*/<>(),\[\]]))")
MAX_CHARS = 2000  # one expression; its reply's max_tokens bounds what a model writes
MAX_DEPTH = 40  # nested negations, brackets and calls: a model's run of `(` or `-` is an error, not a RecursionError


class ExpressionError(ValueError):
    """An expression that does not parse or type-check; the message says where and why."""


@dataclass(frozen=True)
class Num:
    value: float


@dataclass(frozen=True)
class Name:
    name: str  # an input's name as written: `agent_pos`, `own(agent_pos)`, `progress`


@dataclass(frozen=True)
class Column:
    index: int  # obs[index]


@dataclass(frozen=True)
class Neg:
    arg: Node


@dataclass(frozen=True)
class Binary:
    op: str  # + - * / < > <= >=
    left: Node
    right: Node


@dataclass(frozen=True)
class Call:
    fn: str  # a reduction, exp, clamp or where
    args: tuple[Node, ...]
    dim: str | None = None  # a reduction's dim
    bounds: tuple[float, float] | None = None  # clamp's


Node = Num | Name | Column | Neg | Binary | Call


def tokens(text: str) -> list[str]:
    if len(text) > MAX_CHARS:
        raise ExpressionError(f"longer than {MAX_CHARS} characters")
    found, at = [], 0
    text = text.rstrip()
    while at < len(text):
        match = TOKEN.match(text, at)
        if match is None or match.end() == at:
            raise ExpressionError(f"unexpected {text[at:].strip()[:12]!r}")
        found.append(next(g for g in match.groups() if g is not None))
        at = match.end()
    return found


class _Parser:
    def __init__(self, text: str):
        self.tokens = tokens(text)
        self.at = 0
        self.depth = 0

    def peek(self) -> str | None:
        return self.tokens[self.at] if self.at < len(self.tokens) else None

    def take(self, expected: str | None = None) -> str:
        token = self.peek()
        if token is None or (expected is not None and token != expected):
            raise ExpressionError(f"expected {expected or 'more'} but found {token or 'the end'}")
        self.at += 1
        return token

    def expr(self) -> Node:
        left = self.sum()
        if self.peek() in COMPARISONS:
            return Binary(self.take(), left, self.sum())
        return left

    def sum(self) -> Node:
        node = self.prod()
        while self.peek() in ("+", "-"):
            node = Binary(self.take(), node, self.prod())
        return node

    def prod(self) -> Node:
        node = self.unary()
        while self.peek() in ("*", "/"):
            node = Binary(self.take(), node, self.unary())
        return node

    def unary(self) -> Node:
        self.depth += 1
        try:
            if self.depth > MAX_DEPTH:
                raise ExpressionError(f"nested deeper than {MAX_DEPTH} levels")
            if self.peek() == "-":
                self.take()
                return Neg(self.unary())
            return self.atom()
        finally:
            self.depth -= 1

    def number(self) -> float:
        sign = -1.0 if self.peek() == "-" and self.take() else 1.0
        token = self.take()
        if not re.fullmatch(r"\d+(?:\.\d+)?", token):
            raise ExpressionError(f"expected a number but found {token}")
        return sign * float(token)

    def atom(self) -> Node:
        token = self.take()
        if re.fullmatch(r"\d+(?:\.\d+)?", token):
            return Num(float(token))
        if token == "(":
            node = self.expr()
            self.take(")")
            return node
        if not re.fullmatch(r"[A-Za-z_]\w*", token):
            raise ExpressionError(f"unexpected {token}")
        if token == "obs" and self.peek() == "[":
            self.take("[")
            index = self.take()
            if not index.isdigit():
                raise ExpressionError(f"obs[...] takes a column number, not {index}")
            self.take("]")
            return Column(int(index))
        if self.peek() != "(":
            return Name(token)
        self.take("(")
        if token == "own":
            name = self.take()
            self.take(")")
            return Name(f"own({name})")
        if token in REDUCTIONS:
            arg = self.expr()
            self.take(",")
            dim = self.take()
            self.take(")")
            return Call(token, (arg,), dim=dim)
        if token == "exp":
            arg = self.expr()
            self.take(")")
            return Call(token, (arg,))
        if token == "clamp":
            arg = self.expr()
            self.take(",")
            low = self.number()
            self.take(",")
            high = self.number()
            self.take(")")
            return Call(token, (arg,), bounds=(low, high))
        if token == "where":
            args = [self.expr()]
            for _ in range(2):
                self.take(",")
                args.append(self.expr())
            self.take(")")
            return Call(token, tuple(args))
        raise ExpressionError(f"unknown function {token}")


def parse(text: str) -> Node:
    """The tree of one expression; ExpressionError says what does not parse."""
    parser = _Parser(text)
    node = parser.expr()
    if parser.peek() is not None:
        raise ExpressionError(f"unexpected {parser.peek()} after a whole expression")
    return node
