"""Terminal side of a run: rich rendering of stream events and the human approval prompts.

`RichUI` implements the engine's `RunUI` protocol (docs/internals.md): `on_event(event)`
draws progress, `ask(payload)` answers an interrupt (payload kinds documented in
graph/state.py). Without a terminal `ask` returns None, so the run stops as `interrupted`
and the CLI prints how to answer with `lero resume RUN_ID --answer FILE`.
Input and output are injectable so the prompts are testable.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

from rich import box
from rich.console import Console
from rich.markup import escape
from rich.panel import Panel
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.syntax import Syntax
from rich.table import Table
from rich.text import Text

from lero.app.approval_view import candidate_card
from lero.app.numbers import fmt_number
from lero.graph.rundir import CANDIDATES_DIR, CODE_FILE, REVIEW_FILE
from lero.graph.summary import metric_names
from lero.sandbox import EVALUATE, TRAIN

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


TASK_KINDS = (TRAIN.name, EVALUATE.name)  # sandbox job kinds the graph reports as training tasks

# ---------------------------------------------------------------- tables


def render_summary(report: dict, console: Console) -> None:
    """report.json as two tables: best vs baseline, then generations."""
    table = Table(title=f"run {report['run_id']} ({report['status']})")
    table.add_column("")
    table.add_column("candidate")
    table.add_column("fitness", justify="right")
    entries = (("baseline", report["baseline"]), ("best", report["best"]))
    names = metric_names(*(entry.get("eval") or {} for _, entry in entries))
    for metric in names:
        table.add_column(metric, justify="right")
    for label, entry in entries:
        metrics = entry.get("eval") or {}
        table.add_row(
            label,
            str(entry.get("candidate_id") or "—"),
            fmt_number(entry.get("fitness")),
            *(fmt_number(metrics.get(m)) for m in names),
        )
    console.print(table)
    gens = Table(title="generations")
    for column in ("generation", "candidates", "valid", "best fitness", "mean fitness"):
        gens.add_column(column, justify="right")
    for g in report["generations"]:
        gens.add_row(
            str(g["generation"]),
            str(g["candidates"]),
            str(g["valid"]),
            fmt_number(g["best_fitness"]),
            fmt_number(g["mean_fitness"]),
        )
    console.print(gens)
    llm = report["llm"]
    console.print(
        f"LLM {llm['requests']} requests ({llm['prompt_tokens']} + {llm['completion_tokens']} "
        f"tokens), {report['env_steps'] or 0} env steps, {fmt_number(report['wall_s'], 1)} s"
    )


def render_runs(rows: list[dict], console: Console) -> None:
    """`lero runs`: one line per run (rows from app.report.run_row). The id never wraps or
    shortens (it is what people copy; a generated one starts with its UTC start time); the
    other columns give way on a narrow terminal."""
    table = Table(title="runs", box=box.SIMPLE_HEAD, pad_edge=False)
    table.add_column("id", no_wrap=True, min_width=max((len(r["run_id"]) for r in rows), default=2))
    for column in ("status", "gens", "env", "algo", "steps", "best"):
        table.add_column(column, justify="right" if column in ("gens", "steps", "best") else "left", overflow="fold")
    for row in rows:
        if row.get("error"):  # a run that cannot be read: its reason, not a traceback
            table.add_row(row["run_id"], f"{row['status']}: {row['error']}", *("—",) * 5)
            continue
        table.add_row(
            row["run_id"],
            Text(row["shown_status"], style="bold yellow" if row["needs_answer"] else ""),
            row["generations"],
            str(row.get("env") or "—"),
            str(row.get("algo") or "—"),
            f"{row['steps']:,}" if isinstance(row.get("steps"), int) else "—",
            fmt_number(row["best_fitness"]),
        )
    console.print(table)


class EstimatedTimeRemaining(TimeRemainingColumn):
    """Rich's time remaining, from the task's measured speed; before the task has one, a
    task with an `estimated_speed` field (the run's bar: the chat's cost estimate,
    app.desk.estimated_steps_per_s) counts down from its estimate instead of `-:--:--`."""

    def render(self, task: Any) -> Text:
        estimate = task.fields.get("estimated_speed")
        if task.speed is not None or not estimate or task.total is None or task.finished:
            return super().render(task)
        left = max((task.total - task.completed) / estimate - (task.elapsed or 0.0), 0.0)
        minutes, seconds = divmod(int(left), 60)
        hours, minutes = divmod(minutes, 60)
        return Text(f"~{hours}:{minutes:02d}:{seconds:02d}", style="progress.remaining")


def _progress(console: Console, clock: Callable[[], float] | None = None) -> Progress:
    """Live bars on a terminal; none in a pipe or a file, where the lines printed beside
    them (one per finished job and generation) are the whole output. CLOCK: tests force time."""
    return Progress(
        SpinnerColumn(),
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        EstimatedTimeRemaining(),
        TextColumn("{task.fields[note]}"),
        console=console,
        disable=not console.is_terminal,
        **({"get_time": clock} if clock else {}),
    )


def return_note(info: dict) -> str:
    """The progress bar's note; `return` is None until the first episode has finished."""
    if "return" not in info:
        return ""
    return f"return {fmt_number(info['return'], 2)}"


@contextmanager
def train_progress(console: Console, title: str) -> Iterator[Callable[[int, int, dict], None]]:
    """A progress bar for one `training.train` call; yields its `progress` callback."""
    with _progress(console) as bar:
        task = bar.add_task(title, total=None, note="")

        def update(done: int, total: int, info: dict) -> None:
            bar.update(task, completed=done, total=max(total, done), note=return_note(info))

        yield update


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


# ---------------------------------------------------------------- the RunUI


class RichUI:
    """Progress bars for generations / jobs / training, and interactive approvals.

    `interactive=None` asks only when both stdin and the console are terminals.
    Event fields follow graph.context: every event carries `event` (its
    events.jsonl name) and `type` (which handler draws it).
    """

    def __init__(
        self,
        console: Console | None = None,
        stdin: IO[str] | None = None,
        interactive: bool | None = None,
        editor: str | None = None,
        generations: int | None = None,
        env_steps: int | None = None,
        clock: Callable[[], float] | None = None,
    ) -> None:
        self.console = console or Console()
        self.stdin = stdin or sys.stdin
        if interactive is None:
            interactive = self.stdin.isatty() and self.console.is_terminal
        self.interactive = interactive
        self.asker = Asker(self.console, self.stdin)
        self.editor = editor or os.environ.get("VISUAL") or os.environ.get("EDITOR") or "vi"
        self.progress = _progress(self.console, clock)
        self.bars: dict[str, TaskID] = {}
        self.generations = generations  # total, for the generations bar
        self.env_steps = env_steps  # the run's planned env steps: its bar's ETA runs on measured speed
        self.trained: dict[str, int] = {}  # steps each training job has reported
        self.queued: set[str] = set()  # training jobs started, no progress yet (waiting for a slot)
        self.llm_tokens = 0

    def __enter__(self) -> RichUI:
        self.progress.start()
        if self.env_steps:
            self._run_bar()  # from the run's start: its elapsed time counts against an estimate
        return self

    def __exit__(self, *exc: object) -> None:
        self.progress.stop()

    # -- events

    def on_event(self, event: dict) -> None:
        handler = getattr(self, f"_on_{event.get('type')}", None)
        if handler is not None:
            handler(event)

    def _say(self, text: str) -> None:
        self.progress.console.print(text)

    def _bar(self, key: str, description: str, total: float | None) -> TaskID:
        if key not in self.bars:
            self.bars[key] = self.progress.add_task(description, total=total, note="")
        return self.bars[key]

    def _close_bar(self, key: str) -> None:
        if key in self.bars:
            self.progress.remove_task(self.bars.pop(key))

    def _on_generation(self, event: dict) -> None:
        gen = event.get("generation")
        bar = self._bar("generations", "generations", self.generations)
        if event.get("event") == "generation_finished":
            self.progress.advance(bar)
            self._say(
                f"[bold]generation {gen} done[/]: {event.get('valid', '?')} valid, "
                f"best fitness {fmt_number(event.get('best_fitness'))}"
            )
        else:
            self._say(f"[bold]generation {gen}[/]")

    def _on_candidate(self, event: dict) -> None:
        origin = f" ({event['origin']})" if event.get("origin") else ""
        state = " / ".join(str(event[k]) for k in ("stage", "status") if event.get(k))
        self._say(f"candidate {event.get('candidate_id')}{origin}: {state}")

    def _job_key(self, event: dict) -> tuple[str, str]:
        """Sandbox jobs have a job_id; a graph train task is one (candidate, seed)."""
        label = f"{event.get('kind', 'job')} {event.get('candidate_id') or ''}".strip()
        if event.get("job_id"):
            return f"job:{event['job_id']}", label
        return (
            f"task:{event.get('candidate_id')}:{event.get('seed')}",
            f"{label} seed {event.get('seed')}",
        )

    def _on_job(self, event: dict) -> None:
        """One bar per running job; a training job waiting for a slot is only counted. The
        sandbox's own train / evaluate jobs are the graph's training tasks seen from below:
        no second bar, no second line."""
        key, label = self._job_key(event)
        if key.startswith("job:") and event.get("kind") in TASK_KINDS:
            return
        status = event.get("status")
        if event.get("event", "").endswith("_started") or status in (None, "started", "running"):
            if key.startswith("task:"):
                self.queued.add(key)
                self._show_queued()
            else:
                self._bar(key, label, None)
            return
        self._close_bar(key)
        self.queued.discard(key)
        self._show_queued()
        cached = " (cached)" if event.get("cached") else ""
        colour = "green" if status == "ok" else "red"
        fitness = (
            f" fitness {fmt_number(event['fitness'])}" if event.get("fitness") is not None else ""
        )
        style = "" if key.startswith("task:") else "[dim]sandbox[/] "
        self._say(f"{style}{label}: [{colour}]{status}[/]{cached}{fitness}")

    def _show_queued(self) -> None:
        if not self.queued:
            self._close_bar("queued")
            return
        bar = self._bar("queued", "", None)
        self.progress.update(bar, description=f"{len(self.queued)} training job(s) queued for a slot")

    def _on_train_progress(self, event: dict) -> None:
        key, label = self._job_key({**event, "kind": TRAIN.name})
        self.queued.discard(key)
        self._show_queued()
        bar = self._bar(key, label, event.get("total"))
        self.progress.update(
            bar, completed=event.get("done", 0), total=event.get("total"), note=return_note(event)
        )
        done = int(event.get("done") or 0)
        if self.env_steps:
            self.progress.advance(self._run_bar(), max(done - self.trained.get(key, 0), 0))
        self.trained[key] = max(done, self.trained.get(key, 0))

    def _run_bar(self) -> TaskID:
        return self._bar("run", "run (env steps)", self.env_steps)

    def estimate(self, steps_per_s: float) -> None:
        """The run's speed as the chat's cost estimate has it: the run's bar counts down from
        it until the jobs' own progress gives a measured speed (thread-safe: Rich locks)."""
        if self.env_steps:
            self.progress.update(self._run_bar(), estimated_speed=steps_per_s)

    def _on_llm(self, event: dict) -> None:
        bar = self._bar("llm", "LLM requests", None)
        self.progress.advance(bar)
        self.llm_tokens += int(event.get("prompt_tokens") or 0) + int(
            event.get("completion_tokens") or 0
        )
        self.progress.update(bar, note=f"{event.get('role') or ''} {self.llm_tokens} tokens")
        if event.get("status") == "error":
            self._say(
                f"[red]LLM {event.get('role')} request failed:[/] {escape(str(event.get('error')))}"
            )

    def _on_interrupt(self, event: dict) -> None:
        self._say(f"[yellow]waiting for approval: {event.get('kind')}[/]")

    def _on_log(self, event: dict) -> None:
        """Sentences for people only; the key=value records stay in events.jsonl."""
        if event.get("message"):
            self._say(escape(str(event["message"])))

    # -- interrupts

    def ask(self, payload: dict) -> Any | None:
        """Answer an interrupt at the terminal; None without one, or when input ends
        (the run then stops as `interrupted` and can be resumed)."""
        if not self.interactive:
            return None
        asker = getattr(self, f"_ask_{payload.get('kind')}", None)
        if asker is None:
            raise ValueError(f"unknown interrupt kind {payload.get('kind')!r}")
        self.progress.stop()
        try:
            return asker(payload)
        except EOFError:
            return None
        finally:
            self.progress.start()

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
        """One screen per candidate (app.approval_view): its number, terms and features, the
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
