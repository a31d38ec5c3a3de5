"""Duplicate detection for candidate code: only semantically identical modules are duplicates.

A refinement of an elite (a rescaled term, one changed line) is a new candidate and is
kept; what is dropped is a module whose normalised AST equals one already known:
comments, docstrings, layout and the names of local variables do not count.
"""

from __future__ import annotations

import ast

from lero.training.contract import parse_python


class _Normaliser(ast.NodeTransformer):
    """Drops docstrings and renames each function's locals by order of first appearance."""

    def visit_FunctionDef(self, node: ast.FunctionDef) -> ast.AST:
        names: dict[str, str] = {}
        for arg in [*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs]:
            arg.arg = names.setdefault(arg.arg, f"v{len(names)}")
        for child in ast.walk(node):
            if isinstance(child, ast.Name) and isinstance(child.ctx, ast.Store):
                names.setdefault(child.id, f"v{len(names)}")
        for child in ast.walk(node):
            if isinstance(child, ast.Name) and child.id in names:
                child.id = names[child.id]
            elif isinstance(child, ast.arg) and child.arg in names:
                child.arg = names[child.arg]
        return self.generic_visit(node)

    def generic_visit(self, node: ast.AST) -> ast.AST:
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and _is_docstring(body[0]):
            node.body = body[1:] or [ast.Pass()]  # type: ignore[attr-defined]
        return super().generic_visit(node)


def _is_docstring(statement: ast.stmt) -> bool:
    return (
        isinstance(statement, ast.Expr)
        and isinstance(statement.value, ast.Constant)
        and isinstance(statement.value.value, str)
    )


def normalised(code: str) -> str:
    """A canonical dump of `code`'s AST; the stripped text itself when it does not parse."""
    try:
        tree = parse_python(code)
    except (SyntaxError, ValueError):
        return code.strip()
    return ast.dump(_Normaliser().visit(tree), annotate_fields=False)


def is_duplicate(code: str, others: list[str]) -> bool:
    """True when `code` is semantically identical to one of `others`."""
    mine = normalised(code)
    return any(mine == normalised(other) for other in others)
