"""Prompt templates (files under agents/prompts/) and the text blocks they are filled with.

Templates use `$name` placeholders (`string.Template`), so code with braces passes
through untouched. Context is Markovian: each prompt holds only what the next step
needs (the best elites, the latest reflection, the current code and error).
"""

from __future__ import annotations

import functools
from pathlib import Path
from string import Template

from lero.agents.records import Elite

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


def format_evolution(elites: list[Elite], reflection: str, refine: Elite | None, limit: int) -> dict[str, str]:
    """What the designer knows from earlier generations, each piece once, as two prompt parts
    (shortened separately when the prompt must fit a small window).

    `reflection`: the reflection text (baseline, other candidates, failures). `elites`: either
    the elite to refine (code and statistics: an exploit draft) or a one-line summary of the
    best `limit` elites (an explore draft), then the general tips.
    """
    if not elites and not reflection.strip():
        first = (
            "# Evolution so far\n\nThis is the first generation: no candidate has been trained "
            "yet. Start from the task and the environment description.\n"
        )
        return {"reflection": "", "elites": first}
    parts = []
    if refine is not None:
        parts.append(
            f"# Elite to refine: {refine.candidate_id} (fitness {refine.fitness:.4g})\n\n"
            f"```python\n{refine.code.strip()}\n```\n\n"
            f"{refine.reflection.strip() or 'No statistics recorded.'}"
        )
    elif elites:
        best = sorted(elites, key=lambda e: e.fitness, reverse=True)[:limit]
        parts.append("# Elites so far (best first)\n\n" + "\n".join(
            f"- {e.candidate_id}: fitness {e.fitness:.4g}; "
            + (", ".join(f"{k} {v:.3g}" for k, v in sorted(e.metrics.items())) or "no evaluation")
            for e in best
        ))
    parts.append(render("designer_tips").strip())
    return {
        "reflection": f"{reflection.strip()}\n\n" if reflection.strip() else "",
        "elites": "\n\n".join(parts) + "\n",
    }


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
