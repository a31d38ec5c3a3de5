"""What a person reads to decide on one candidate: its number among those asked about, its
reward terms and observation features, its diff against its parent, the critic's points,
and an edit the gate refused. Shared by the terminal (app.console.progress) and the web UI, so the
two show the same card; the full module stays one request away in both.
"""

from __future__ import annotations

import ast
import difflib
import re
from typing import Any

MARKER = re.compile(r"^\s*#\s*(term|feature):\s*(.+?)\s*$")  # the offline designer's blocks
DIFF_CONTEXT = 2  # unchanged lines around each change: enough to place it, short enough for a screen


def _function(tree: ast.Module, name: str) -> ast.FunctionDef | None:
    return next((n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == name), None)


def _returned_keys(function: ast.FunctionDef) -> list[str]:
    """String keys of the dict literals `hybrid_reward` returns beside its reward."""
    keys: list[str] = []
    for node in ast.walk(function):
        if isinstance(node, ast.Return) and isinstance(node.value, ast.Tuple):
            for part in node.value.elts:
                if isinstance(part, ast.Dict):
                    keys += [k.value for k in part.keys if isinstance(k, ast.Constant) and isinstance(k.value, str)]
    return list(dict.fromkeys(keys))


def _concatenated(function: ast.FunctionDef) -> list[str]:
    """What `enhance_observation` concatenates to the observation: the source of each piece
    of its `torch.cat([...])` after the first (the observation itself)."""
    pieces: list[str] = []
    for node in ast.walk(function):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "cat"
                and node.args and isinstance(node.args[0], ast.List | ast.Tuple)):  # fmt: skip
            pieces += [ast.unparse(p) for p in node.args[0].elts[1:]]
    return list(dict.fromkeys(pieces))


def terms_and_features(code: str | None) -> dict[str, list[str]]:
    """The reward terms and observation features of a candidate module, read without running
    it: the offline designer's `# term:` / `# feature:` markers, else the component names
    `hybrid_reward` returns and the pieces `enhance_observation` concatenates."""
    marked: dict[str, list[str]] = {"term": [], "feature": []}
    for line in (code or "").splitlines():
        if match := MARKER.match(line):
            marked[match.group(1)].append(match.group(2))
    terms, features = marked["term"], marked["feature"]
    try:
        tree = ast.parse(code or "")
    except SyntaxError:
        return {"terms": terms, "features": features}
    if not terms and (reward := _function(tree, "hybrid_reward")):
        terms = _returned_keys(reward)
    if not features and (enhance := _function(tree, "enhance_observation")):
        features = _concatenated(enhance)
    return {"terms": terms, "features": features}


def code_diff(before: str, after: str, before_name: str, after_name: str) -> list[str]:
    """A unified diff of two modules (no trailing newlines), DIFF_CONTEXT lines of context."""
    return list(difflib.unified_diff(before.splitlines(), after.splitlines(), before_name, after_name,
                                     n=DIFF_CONTEXT, lineterm=""))  # fmt: skip


def candidate_card(candidate: dict[str, Any], index: int, total: int) -> dict[str, Any]:
    """One candidate of a `candidates` question (payload schema: graph.state) as shown to a
    person: INDEX (from 1) of TOTAL, and the diff against its parent when it has one."""
    code = candidate.get("code") or ""
    parents = candidate.get("parents") or []
    parent_code = candidate.get("parent_code")
    diff = code_diff(parent_code, code, parents[0], str(candidate["candidate_id"])) if parent_code and parents else []
    review = candidate.get("review") or {}
    refused = candidate.get("refused_edit") or None
    return {
        "candidate_id": str(candidate["candidate_id"]),
        "number": f"{index} of {total}",
        "kind": candidate.get("kind") or "explore",
        "origin": candidate.get("origin") or "?",
        "parent": parents[0] if parents else None,
        **terms_and_features(code),
        "lines": len(code.splitlines()),
        "diff": diff,
        "verdict": review.get("verdict"),
        "points": [str(p) for p in review.get("points") or []] or ([review["text"]] if review.get("text") else []),
        "refused_edit": refused,
        "refused_diff": code_diff(code, refused["code"], "shown", "your edit") if refused else [],
    }
