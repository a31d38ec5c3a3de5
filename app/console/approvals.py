"""The terminal's approvals: the line prompts (`Asker`, shared with the chat), the screens
that answer the engine's questions (the spec, each candidate, each generation) and, without a
terminal, which JSON file answers them (`lero resume RUN_ID --answer FILE`).

The payload kinds are documented in graph/state.py; a candidate's card is
`app.console.approval_view`'s, the one the web UI shows. Input and output are injected, so
every prompt is testable; progress drawing is app.console.progress's.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import IO, Any

from rich.console import Console
from rich.markup import escape
from rich.panel import Panel
from rich.syntax import Syntax
from rich.table import Table
from rich.text import Text

from lero.app.console.approval_view import candidate_card
from lero.app.reports.numbers import fmt_number
from lero.graph.rundir import CANDIDATES_DIR, CODE_FILE, REVIEW_FILE

# ---------------------------------------------------------------- answers without a terminal

ANSWER_FORMATS = {
    "spec": '{"action": "approve"} or {"action": "reject"}',
    "candidates": (
        '{"decisions": {"<candidate_id>": {"action": "approve" | "reject" | "edit" | "comment", '
        '"code": "<new source, for edit>", "comment": "<text, for comment>"}}, '
        '"default": "approve" | "reject"}  (candidates not named get the default)'
    ),
    "generation": '{"action": "continue" | "stop", "feedback": "<text for the designer> or null"}',
}


def describe_answer(payload: dict) -> str:
    """What the pending question is and which JSON answers it (for `--answer FILE`)."""
    kind = payload.get("kind", "?")
    lines = [f"question ({kind}): {payload.get('question', '')}".rstrip()]
    if kind == "candidates":
        ids = [c.get("candidate_id") for c in payload.get("candidates", [])]
        lines.append(
            f"candidates: {', '.join(map(str, ids))} "
            f"(code and reviews: {CANDIDATES_DIR}/<id>/{CODE_FILE}, {REVIEW_FILE} in the run directory)"
        )
    lines.append(f"answer FILE holds JSON: {ANSWER_FORMATS.get(kind, payload.get('answers'))}")
    return "\n".join(lines)


# ---------------------------------------------------------------- line prompts


class Asker:
    """Prompts on a console, answers read line by line from a stream.

    Enter takes the default; end of input raises EOFError instead of silently accepting
    defaults (which could start a run nobody confirmed).
    """

    def __init__(self, console: Console | None = None, stdin: IO[str] | None = None) -> None:
        self.console = console or Console()
        self.stdin = stdin or sys.stdin

    def say(self, text: object, **kwargs: Any) -> None:
        self.console.print(text, **kwargs)

    def line(self, prompt: str) -> str:
        """One line of text, stripped."""
        self.console.print(prompt, end="")
        text = self.stdin.readline()
        if text == "":
            raise EOFError("input ended")
        return text.strip()

    def text(self, prompt: str, default: str = "") -> str:
        shown = f" [dim]({escape(default)})[/]" if default else ""
        return self.line(f"{escape(prompt)}{shown}: ") or default

    def choice(self, prompt: str, choices: list[str], default: str) -> str:
        while True:
            options = escape(f"[{'/'.join(choices)}]")
            answer = self.line(f"{escape(prompt)} {options} [dim]({default})[/]: ").lower()
            if not answer:
                return default
            matches = [c for c in choices if c.startswith(answer)]
            if len(matches) == 1 or answer in choices:
                return answer if answer in choices else matches[0]
            self.say(f"[red]choose one of {', '.join(choices)}[/]")

    def number(self, prompt: str, default: int, minimum: int = 1) -> int:
        while True:
            answer = self.line(f"{escape(prompt)} [dim]({default})[/]: ")
            try:
                value = int(answer) if answer else default
            except ValueError:
                self.say(f"[red]a whole number, got {answer!r}[/]")
                continue
            if value >= minimum:
                return value
            self.say(f"[red]must be >= {minimum}[/]")

    def confirm(self, prompt: str, default: bool = True) -> bool:
        while True:
            shown = escape(f"{prompt} [y/n]")
            answer = self.line(f"{shown} [dim]({'y' if default else 'n'})[/]: ").lower()
            if not answer:
                return default
            if answer in ("y", "yes", "n", "no"):
                return answer.startswith("y")
            self.say("[red]answer y or n[/]")


# ---------------------------------------------------------------- the approval screens


class Approvals:
    """Answers the engine's questions at the terminal, one screen per kind (`_ask_<kind>`).

    The editor for `edit` is `editor`, else $VISUAL, else $EDITOR, else vi.
    """

    def __init__(self, asker: Asker, editor: str | None = None) -> None:
        self.asker = asker
        self.console = asker.console
        self.editor = editor or os.environ.get("VISUAL") or os.environ.get("EDITOR") or "vi"

    def answer(self, payload: dict) -> dict:
        """The answer to one interrupt's payload; EOFError when input ends."""
        screen = getattr(self, f"_ask_{payload.get('kind')}", None)
        if screen is None:
            raise ValueError(f"unknown interrupt kind {payload.get('kind')!r}")
        return screen(payload)

    def _ask_spec(self, payload: dict) -> dict:
        table = Table(title=f"run {payload.get('run_id', '')}: experiment", show_header=False)
        for key, value in payload.get("spec", {}).items():
            shown = json.dumps(value) if isinstance(value, dict | list) else str(value)
            table.add_row(key, Text(shown))
        self.console.print(table)
        if payload.get("env_description"):
            self.console.print(Panel(Text(payload["env_description"]), title="environment"))
        ok = self.asker.confirm(payload.get("question", "Start this run?"))
        return {"action": "approve" if ok else "reject"}

    def _ask_candidates(self, payload: dict) -> dict:
        """One screen per candidate (app.console.approval_view): its number, terms and features, the
        diff against its parent, the critic's points; the whole module on `code`."""
        candidates = payload.get("candidates", [])
        decisions = {}
        for index, cand in enumerate(candidates, start=1):
            card = candidate_card(cand, index, len(candidates))
            self._show_card(card)
            decisions[card["candidate_id"]] = self._decide_candidate(cand, card)
        return {"decisions": decisions, "default": "approve"}

    def _show_card(self, card: dict) -> None:
        source = f"{card['kind']} of {card['parent']}" if card["parent"] else card["kind"]
        self.console.print(f"[bold]candidate {card['candidate_id']}[/] ({card['number']}): {escape(source)}, "
                           f"by {escape(card['origin'])}, {card['lines']} lines")  # fmt: skip
        for label, names in (("reward terms", card["terms"]), ("features", card["features"])):
            self.console.print(f"  {label}: {escape(', '.join(names)) if names else '—'}")
        if card["diff"]:
            self.console.print(Panel(Syntax("\n".join(card["diff"]), "diff"), title=f"diff against {card['parent']}"))
        else:
            self.console.print("  [dim]a new design (no parent to compare with): answer `code` to read it[/]")
        if card["verdict"]:
            points = Text("\n".join(f"- {p}" for p in card["points"]))
            self.console.print(Panel(points, title=f"critic: {card['verdict']}"))
        if refused := card["refused_edit"]:
            self.console.print(Panel(
                Text(f"{refused['reason']}\n\nThe code above is the one before your edit. Answer `edit` to fix "
                     "your text (it opens again as you left it), or anything else to drop it."),
                title="[red]your edit was NOT trained: the gate stopped it[/]", border_style="red"))  # fmt: skip

    def _decide_candidate(self, cand: dict, card: dict) -> dict:
        """approve / reject, or a non-empty comment / edited module (asked again if empty);
        `code` shows the whole module first. An edit the gate refused reopens as it was left."""
        while True:
            action = self.asker.choice(
                f"candidate {card['candidate_id']} ({card['number']})",
                ["approve", "reject", "edit", "comment", "code"],
                "approve",
            )
            if action in ("approve", "reject"):
                return {"action": action}
            if action == "code":
                self.console.print(Panel(Syntax(cand.get("code") or "", "python", line_numbers=True),
                                         title=f"candidate {card['candidate_id']}"))  # fmt: skip
                continue
            if action == "comment":
                comment = self.asker.text("comment for the designer")
                if comment:
                    return {"action": "comment", "comment": comment}
                continue
            start = (card["refused_edit"] or {}).get("code") or cand.get("code") or ""
            try:
                code = self.edit_code(start)
            except (OSError, ValueError) as error:  # no such editor, editor failed
                self.console.print(f"[red]edit failed:[/] {escape(str(error))}")
                continue
            if code.strip():
                return {"action": "edit", "code": code}
            self.console.print("[red]the edited module is empty[/]")

    def edit_code(self, code: str) -> str:
        """Open `$EDITOR` on a temp copy of the code and return what was saved."""
        with tempfile.TemporaryDirectory(prefix="lero-edit-") as tmp:
            path = Path(tmp) / CODE_FILE
            path.write_text(code)
            done = subprocess.run([*shlex.split(self.editor), str(path)], check=False)
            if done.returncode != 0:
                raise ValueError(f"editor {self.editor!r} exited with status {done.returncode}")
            return path.read_text()

    def _ask_generation(self, payload: dict) -> dict:
        table = Table(title=f"generation {payload.get('generation')} done")
        for column in ("candidate", "status", "fitness"):
            table.add_column(column)
        for cand in payload.get("candidates", []):
            table.add_row(
                str(cand.get("candidate_id")),
                str(cand.get("status")),
                fmt_number(cand.get("fitness")),
            )
        self.console.print(table)
        best = payload.get("best") or {}
        self.console.print(
            f"best {best.get('candidate_id', '—')} fitness {fmt_number(best.get('fitness'))}, "
            f"baseline {fmt_number(payload.get('baseline_fitness'))}"
        )
        if payload.get("reflection"):
            self.console.print(Panel(Text(str(payload["reflection"])), title="reflection"))
        question = payload.get("question", "next generation?")
        action = self.asker.choice(question, ["continue", "stop"], "continue")
        feedback = ""
        if action == "continue":
            feedback = self.asker.text("feedback for the designer (empty = none)")
        return {"action": action, "feedback": feedback or None}
