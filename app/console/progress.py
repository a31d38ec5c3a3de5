"""Terminal side of a run: its progress drawn from the engine's stream events, and the tables
of `lero report` and `lero runs`; the approvals are app.console.approvals'.

`RichUI` implements the engine's `RunUI` protocol (docs/internals.md): `on_event(event)`
draws progress, `ask(payload)` pauses it while `Approvals` answers an interrupt. Without a
terminal `ask` returns None, so the run stops as `interrupted` and the CLI prints how to
answer with `lero resume RUN_ID --answer FILE`. Input and output are injectable.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import IO, Any

from rich import box
from rich.console import Console
from rich.markup import escape
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
from rich.table import Table
from rich.text import Text

from lero.agents.records import PROBE_ROLE
from lero.app.console.approvals import Approvals, Asker
from lero.app.console.eta import SteadyEta
from lero.app.reports.numbers import fmt_duration, fmt_number
from lero.graph.summary import metric_names
from lero.sandbox import EVALUATE, TRAIN
from lero.training.validation import finite_number

TASK_KINDS = (TRAIN.name, EVALUATE.name)  # sandbox job kinds the graph reports as training tasks

# ---------------------------------------------------------------- tables


def render_summary(report: dict, console: Console, headline: str) -> None:
    """HEADLINE (the confirmed verdict, `app.reports.confirmation_verdict.headline`) first, then report.json
    as two tables: the loop's best vs baseline on the selection episodes, then generations."""
    console.print(headline, style="bold", markup=False, highlight=False, soft_wrap=True)
    table = Table(title=f"run {report['run_id']} ({report['status']}): the loop, on the selection episodes")
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


RUNS_COLUMNS = ("id", "status", "gens", "env", "algo", "steps", "confirmed", "loop")
RUNS_RIGHT = {"gens", "steps", "loop"}
RUNS_NOTE = ("confirmed: the winner against native on held-out episodes (* fewer than 5 seeds per arm); "
             "loop: the loop's best fitness, on the selection episodes")  # fmt: skip
LABEL_WIDTH = 24  # the id column widens to this for a run's --name / --tag line (longer ones wrap)
GIVE_WAY = {"status": 0, "env": 6}  # narrowing on a small terminal, in this order (0: its longest word)


def count_text(value: object) -> str:
    """An env-step count in a few characters: 300k, 1.5M."""
    if not isinstance(value, int) or isinstance(value, bool):
        return "—"
    for unit, size in (("M", 1_000_000), ("k", 1_000)):
        if value >= size:
            return f"{value / size:.3g}{unit}"
    return str(value)


def _runs_widths(columns: tuple[str, ...], cells: list[list[str]], width: int, labels: list[str]) -> list[int]:
    """Each column's width for `lero runs` on a WIDTH-column terminal: its longest cell (the id's
    also fits a run's LABELS line, up to LABEL_WIDTH), and when the table is too wide status
    narrows (wrapped between words, never inside one: no "complet/ed"), then env (cut with
    "…"); the id and the numbers keep theirs."""
    texts = [[name, *(row[i] for row in cells)] for i, name in enumerate(columns)]
    widths = [max(map(len, col)) for col in texts]
    widths[0] = max(widths[0], min(max((len(label) + 2 for label in labels if label), default=0), LABEL_WIDTH))
    excess = sum(widths) + len(widths) - 1 - width  # one space between columns
    for name, floor in GIVE_WAY.items():
        i = columns.index(name)
        floor = floor or max(len(word) for cell in texts[i] for word in cell.split() or [""])
        cut = max(min(excess, widths[i] - floor), 0)
        widths[i] -= cut
        excess -= cut
    return widths


def render_runs(rows: list[dict], console: Console) -> None:
    """`lero runs`: one line per run (rows from app.reports.run_report.run_row), readable at 80 columns:
    the id never wraps or shortens (it is what people copy; a generated one starts with its
    UTC start time), the numbers neither; status and env give way (`_runs_widths`). A run's
    --name and --tags go on a line of their own under its id. A run that cannot be read is
    listed below the table with its reason."""
    cells, styles, labels, unreadable = [], [], [], []
    for row in rows:
        labels.append(row.get("label") or "")
        if row.get("error"):  # a run that cannot be read: its reason, not a traceback
            unreadable.append(row)
            cells.append([row["run_id"], row["status"], *("—",) * (len(RUNS_COLUMNS) - 2)])
            styles.append("")
            continue
        cells.append([row["run_id"], row["shown_status"], row["generations"], str(row.get("env") or "—"),
                      str(row.get("algo") or "—"), count_text(row.get("steps")), row.get("confirmed", "-"),
                      fmt_number(row["best_fitness"])])  # fmt: skip
        styles.append("bold yellow" if row["needs_answer"] else "")
    table = Table(title="runs", box=box.SIMPLE_HEAD, show_edge=False, padding=0)  # the box parts columns by a space
    for name, width in zip(RUNS_COLUMNS, _runs_widths(RUNS_COLUMNS, cells, console.width, labels), strict=True):
        table.add_column(name, justify="right" if name in RUNS_RIGHT else "left", width=width,
                         no_wrap=name != "status", overflow="ellipsis")  # fmt: skip
    for row, style, label in zip(cells, styles, labels, strict=True):  # Text: never read as markup
        table.add_row(row[0], Text(row[1], style=style), *row[2:])
        if label:
            table.add_row(Text(f"  {label}", style="dim", no_wrap=False, overflow="fold"), *("",) * (len(RUNS_COLUMNS) - 1))
    console.print(table)
    for row in unreadable:
        console.print(f"{row['run_id']}: {row['status']}: {row['error']}", markup=False, highlight=False)
    console.print(RUNS_NOTE, markup=False, highlight=False)


MEASURED_FROM = 0.1  # share of the run's budget after which its own measured speed alone sets the ETA


def run_eta(total: float, completed: float, elapsed: float, estimate: float | None, start: float = 0.0) -> float | None:
    """Seconds left in a run of TOTAL env steps, COMPLETED after ELAPSED seconds of which START
    were done before (a resume). Before any step is measured: the estimator's speed ESTIMATE
    (the chat's cost estimate) counting down; then the run's average speed since it started
    (not a recent window, which swings with bursts of parallel jobs and LLM pauses), blended
    with the estimate until MEASURED_FROM of the budget is measured. None: nothing to go on."""
    left = max(total - completed, 0.0)
    measured = (completed - start) / elapsed if elapsed > 0 and completed > start else None
    if measured is None:
        return None if not estimate else max((total - start) / estimate - elapsed, 0.0)
    weight = min((completed - start) / (MEASURED_FROM * max(total - start, 1.0)), 1.0) if estimate else 1.0
    speed = weight * measured + (1.0 - weight) * (estimate or 0.0)
    return left / speed


def _clock_text(seconds: float) -> str:
    minutes, secs = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}"


class EstimatedTimeRemaining(TimeRemainingColumn):
    """Rich's time remaining; for the run's bar (a task with an `eta` field) `run_eta`: from
    the estimator at the start (`estimated_speed`, app.desk.estimated_steps_per_s), then the
    run's own average speed, with "~" while the estimate still weighs in, shown steady and with
    its error margin (`app.console.eta.SteadyEta`, the task's `steady` field)."""

    def render(self, task: Any) -> Text:
        if "eta" not in task.fields or task.total is None or task.finished:
            return super().render(task)
        estimate, start = task.fields.get("estimated_speed"), task.fields.get("resumed_from", 0)
        left = run_eta(task.total, task.completed, task.elapsed or 0.0, estimate, start)
        if left is None:
            return Text("-:--:--", style="progress.remaining")
        share = min((task.completed - start) / (MEASURED_FROM * max(task.total - start, 1)), 1.0) if estimate else 1.0
        steady = task.fields.get("steady") or SteadyEta()
        shown, margin = steady.read(task.elapsed or 0.0, left, share)
        return Text(f"{'' if share >= 1.0 else '~'}{_clock_text(shown)} ±{_clock_text(margin)}",
                    style="progress.remaining")  # fmt: skip


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


# ---------------------------------------------------------------- the RunUI


class RichUI:
    """Progress bars for generations / jobs / training; interactive approvals through
    `Approvals`.

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
        env_steps_done: int = 0,
    ) -> None:
        self.console = console or Console()
        self.stdin = stdin or sys.stdin
        if interactive is None:
            interactive = self.stdin.isatty() and self.console.is_terminal
        self.interactive = interactive
        self.approvals = Approvals(Asker(self.console, self.stdin), editor)
        self.progress = _progress(self.console, clock)
        self.bars: dict[str, TaskID] = {}
        self.generations = generations  # total, for the generations bar
        self.env_steps = env_steps  # the run's planned env steps: its bar's ETA runs on measured speed
        self.env_steps_done = env_steps_done  # a resumed run's env steps before this process
        self.trained: dict[str, int] = {}  # steps each training job (a sandbox, its seeds summed) has reported
        self.bar_of: dict[str, str] = {}  # sandbox job id -> the bar of the sandbox it shares with its group
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
        """One bar per running sandbox; a training job waiting for a slot is only counted. The
        sandbox's own train / evaluate jobs are the graph's training tasks seen from below:
        their end closes the sandbox's bar, and the graph's event says it in one line."""
        key, label = self._job_key(event)
        status = event.get("status")
        started = event.get("event", "").endswith("_started") or status in (None, "started", "running")
        if key.startswith("job:") and event.get("kind") in TASK_KINDS:
            if not started and (bar := self.bar_of.pop(event["job_id"], None)):
                self._close_bar(bar)
            return
        if started:
            if key.startswith("task:"):
                self.queued.add(key)
                self._show_queued()
            else:
                self._bar(key, label, None)
            return
        self._close_bar(key)
        self.queued.discard(key)
        self._show_queued()
        self._count_cached(event)
        cached = " (cached)" if event.get("cached") else ""
        colour = "green" if status == "ok" else "red"
        fitness = (
            f" fitness {fmt_number(event['fitness'])}" if event.get("fitness") is not None else ""
        )
        took = f" in {fmt_duration(event['elapsed_s'])}" if finite_number(event.get("elapsed_s")) and not cached else ""
        style = "" if key.startswith("task:") else "[dim]sandbox[/] "
        self._say(f"{style}{label}: [{colour}]{status}[/]{cached}{fitness}{took}")

    def _show_queued(self) -> None:
        if not self.queued:
            self._close_bar("queued")
            return
        bar = self._bar("queued", "", None)
        self.progress.update(bar, description=f"{len(self.queued)} training job(s) queued for a slot")

    def _unqueue(self, candidate_id: object, seeds: int) -> None:
        """SEEDS of CANDIDATE_ID's queued training tasks got a sandbox (its progress names the
        job, not the seeds)."""
        for key in [k for k in sorted(self.queued) if k.startswith(f"task:{candidate_id}:")][:seeds]:
            self.queued.discard(key)
        self._show_queued()

    def _on_train_progress(self, event: dict) -> None:
        """A sandbox's training progress. A group's seeds train in one sandbox whose progress
        (their steps summed) comes once per seed's job: one bar, counted once."""
        if event.get("job_id"):
            group_of = event.get("group_of") if isinstance(event.get("group_of"), int) else 1
            key = f"job:{event.get('group') or event['job_id']}"
            self.bar_of[event["job_id"]] = key
            label = f"train {event.get('candidate_id') or ''}".strip() + (f" ({group_of} seeds)" if group_of > 1 else "")
            if key not in self.trained:
                self._unqueue(event.get("candidate_id"), group_of)
        else:  # a progress report of the graph's own task
            key, label = self._job_key({**event, "kind": TRAIN.name})
            self.queued.discard(key)
            self._show_queued()
        bar = self._bar(key, label, event.get("total"))
        self.progress.update(
            bar, completed=event.get("done", 0), total=event.get("total"), note=return_note(event)
        )
        done = int(event.get("done") or 0)
        if self.env_steps:
            self._count(done - self.trained.get(key, 0))
        self.trained[key] = max(done, self.trained.get(key, 0))

    def _count_cached(self, event: dict) -> None:
        """A result from the cache (a loop's training, a confirmation's seed): its env steps
        are done, and no progress ever reported them."""
        if event.get("cached") and self.env_steps and isinstance(event.get("env_steps"), int):
            self._count(event["env_steps"])

    def _count(self, steps: int) -> None:
        """STEPS more env steps on the run's bar, which never passes its total (a rollout can
        overshoot a job's budget)."""
        run = self._run_bar()
        task = next(t for t in self.progress.tasks if t.id == run)
        self.progress.update(run, completed=min(task.completed + max(steps, 0), task.total or 0))

    def _run_bar(self) -> TaskID:
        if "run" not in self.bars:
            done = min(self.env_steps_done, self.env_steps or 0)
            self.bars["run"] = self.progress.add_task("run (env steps)", total=self.env_steps, completed=done,
                                                      note="", eta=True, resumed_from=done,
                                                      steady=SteadyEta())  # fmt: skip
        return self.bars["run"]

    def estimate(self, steps_per_s: float) -> None:
        """The run's speed as the chat's cost estimate has it: the run's bar counts down from
        it, and its measured speed takes over (`run_eta`; thread-safe: Rich locks)."""
        if self.env_steps:
            self.progress.update(self._run_bar(), estimated_speed=steps_per_s)

    def _on_llm(self, event: dict) -> None:
        bar = self._bar("llm", "LLM requests", None)
        self.progress.advance(bar)
        self.llm_tokens += int(event.get("prompt_tokens") or 0) + int(
            event.get("completion_tokens") or 0
        )
        self.progress.update(bar, note=f"{event.get('role') or ''} {self.llm_tokens} tokens")
        if event.get("status") == "error" and event.get("role") != PROBE_ROLE:  # a probe's refusal answers it
            self._say(
                f"[red]LLM {event.get('role')} request failed:[/] {escape(str(event.get('error')))}"
            )

    def _on_interrupt(self, event: dict) -> None:
        self._say(f"[yellow]waiting for approval: {event.get('kind')}[/]")

    def _on_log(self, event: dict) -> None:
        """Sentences for people only; the key=value records stay in events.jsonl. A cached
        confirmation seed (`confirm_finished`) counts on the run bar."""
        self._count_cached(event)
        if event.get("message"):
            self._say(escape(str(event["message"])))

    # -- interrupts

    def ask(self, payload: dict) -> Any | None:
        """Answer an interrupt at the terminal (app.console.approvals); None without one, or
        when input ends (the run then stops as `interrupted` and can be resumed)."""
        if not self.interactive:
            return None
        self.progress.stop()
        try:
            return self.approvals.answer(payload)
        except EOFError:
            return None
        finally:
            self.progress.start()
