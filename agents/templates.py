"""Prompt templates (files under agents/prompts/) and the text blocks they are filled with.

Templates use `$name` placeholders (`string.Template`), so code with braces passes
through untouched. Context is Markovian: each prompt holds only what the next step
needs (the best elites, the latest reflection, the current code and error).
"""

from __future__ import annotations

import functools
from pathlib import Path
from string import Template

from lero.agents.types import Elite

PROMPT_DIR = Path(__file__).parent / "prompts"
MAX_ERROR_CHARS = 3000
MAX_ERROR_LINES = 40


@functools.cache
def _template(name: str) -> Template:
    path = PROMPT_DIR / f"{name}.md"
    if not path.is_file():
        raise ValueError(f"no prompt template {name!r} in {PROMPT_DIR}")
    return Template(path.read_text())


def render(name: str, **values: object) -> str:
    """Fill template `name`; a missing value is a bug, so it raises KeyError."""
    return _template(name).substitute({k: str(v) for k, v in values.items()}).strip() + "\n"


def format_elites(elites: list[Elite], reflection: str, limit: int) -> str:
    """The evolution description: the best `limit` elites with code, metrics and reflection."""
    if not elites:
        return (
            "This is the first generation: no candidate has been trained yet. Start from the "
            "task and the environment description."
        )
    best = sorted(elites, key=lambda e: e.fitness, reverse=True)[:limit]
    parts = []
    for rank, elite in enumerate(best, start=1):
        metrics = ", ".join(f"{k} = {v:.3g}" for k, v in sorted(elite.metrics.items()))
        parts.append(
            f"## Elite {rank}: {elite.candidate_id} (fitness {elite.fitness:.4g})\n\n"
            f"Evaluation: {metrics or 'n/a'}\n\n```python\n{elite.code.strip()}\n```\n\n"
            f"{elite.reflection.strip() or 'No reflection recorded.'}"
        )
    parts.append(
        f"## Reflection on the last generation\n\n{reflection.strip() or 'No reflection text.'}\n\n"
        "Tips: if a task metric stays near zero, rewrite the reward rather than tweak it; a "
        "component that is nearly constant gives no signal (rescale or drop it); a component "
        "whose magnitude dominates the others should be rescaled."
    )
    return "\n\n".join(parts)


def format_feedback(feedback: str | None) -> str:
    return f"# Feedback from the researcher\n\n{feedback.strip()}\n" if feedback else ""


def trim_error(error: str) -> str:
    """The head line and the tail of a long traceback: the part that says what broke."""
    lines = error.strip().splitlines()
    if len(lines) > MAX_ERROR_LINES:
        lines = [lines[0], "...", *lines[-(MAX_ERROR_LINES - 2) :]]
    text = "\n".join(lines)
    return text if len(text) <= MAX_ERROR_CHARS else "...\n" + text[-MAX_ERROR_CHARS:]


def format_history(history: list[tuple[str, str]], limit: int) -> str:
    """Earlier failed repairs, so the debugger does not propose them again."""
    if not history:
        return ""
    recent = history[-limit:]
    parts = [
        f"\n# Earlier repair attempts that also failed ({len(history)} in total, last {len(recent)} shown)\n"
    ]
    for number, (code, error) in enumerate(recent, start=1):
        parts.append(
            f"## Attempt {number}\n\n```python\n{code.strip()}\n```\n\nError:\n\n```\n{trim_error(error)}\n```\n"
        )
    parts.append("Do not repeat these attempts; find the actual cause.\n")
    return "\n".join(parts)
