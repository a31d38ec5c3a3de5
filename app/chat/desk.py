"""The experiment desk: the draft experiment of a chat and every action on it.

Shared by the two chat front-ends (`lero chat` in the terminal, the web UI's chat page).
`ExperimentDesk` holds the draft RunSpec and does the actual work (list and describe
environments, estimate the cost from a measured throughput, set fields, start a run,
inspect runs). The same desk methods are reached three ways:
- as LangChain tools the experiment assistant calls (servers with tool calling),
- as `/commands` typed by the user (any server, and the offline backend),
- from the offline guided dialogue, which asks for each setting with a default.
The dialogue loops live in `app.chat.dialogues`; input and output streams are injected, so
every path is testable end to end.
"""

from __future__ import annotations

import json
import shlex
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lero.app.console.approvals import Asker
from lero.graph.configuration import CANDIDATE_ID, RunError, RunSpec, check_run_id
from lero.graph.confirmation import LOOP_ARM, loop_arm_plan
from lero.graph.rundir import CODE_FILE, RESULT_FILE, REVIEW_FILE, RunDir
from lero.graph.schedule import planned
from lero.graph.trust import OPERATOR_CAPS, OPERATOR_FIELDS, confirm_env, confirm_hint

if TYPE_CHECKING:
    from lero.agents import LLMConfig
    from lero.app.console.progress import RichUI
    from lero.training.envs.registry import ConfirmedEnv

DEFAULT_CHAT_SPEC: dict[str, Any] = {"approve": "spec"}


def chat_run_fields(cfg: LLMConfig, runs_dir: str, settings: dict[str, Any]) -> dict[str, Any]:
    """What the runs a chat starts take from its model: the same model and server, and the LLM
    settings the command line gave (RunSpec-named: `llm_timeout_s`, `context_tokens`)."""
    llm = "offline" if cfg.backend == "offline" else f"openai:{cfg.model}"
    return {"llm": llm, "base_url": cfg.base_url, "runs_dir": runs_dir, **settings}
@dataclass(frozen=True)
class CostEstimate:
    """What a spec trains at a measured speed, in parts that add up: the loop's jobs and the
    confirmation's, each job's budget rounded up to whole ITERATION-step iterations, jobs one
    after another (so `train_s` is an upper bound where jobs share the machine)."""

    loop_jobs: int  # (generations x candidates + baseline) x seeds, at full budget
    steps_per_job: int  # a full-budget loop job's, rounded up
    loop_steps: int  # the loop's env steps (jobs x steps_per_job without halving; less with it)
    confirm_jobs: int  # (confirm_top + native) x confirm_seeds; 0: the run confirms nothing
    confirm_steps_per_job: int  # rounded up
    iteration: int
    steps_per_s: float
    loop_arm_jobs: int = 0  # native@loop's, one per confirmation seed (a sparse task's run); 0: none
    loop_arm_steps_per_job: int = 0  # every env step the run spends, rounded up

    @property
    def jobs(self) -> int:
        return self.loop_jobs + self.confirm_jobs + self.loop_arm_jobs

    @property
    def env_steps(self) -> int:
        return self.loop_steps + self.confirm_jobs * self.confirm_steps_per_job + self.loop_arm_jobs * self.loop_arm_steps_per_job

    @property
    def train_s(self) -> float:
        return self.env_steps / self.steps_per_s


def _rounded(steps: int, iteration: int) -> int:
    return -(-steps // iteration) * iteration


def training_estimate(spec: RunSpec, steps_per_s: float, iteration: int) -> CostEstimate:
    """SPEC's training cost at a measured speed (`RunSpec.budget`'s jobs and steps, split into
    the loop's and the confirmation's)."""
    per_generation, generation_steps = planned(spec.steps, spec.schedule, spec.population)
    steps_per_job = _rounded(spec.steps, iteration)
    confirm, loop_arm = spec.confirm_budget(), spec.loop_arm_steps()
    return CostEstimate(
        loop_jobs=(spec.generations * per_generation + 1) * spec.seeds, steps_per_job=steps_per_job,
        loop_steps=(spec.generations * generation_steps + spec.steps) * spec.seeds * steps_per_job // spec.steps,
        confirm_jobs=(spec.confirm_top + 1) * spec.confirm_seeds if confirm else 0,
        confirm_steps_per_job=_rounded(confirm, iteration) if confirm else 0, iteration=iteration,
        steps_per_s=steps_per_s, loop_arm_jobs=spec.confirm_seeds if loop_arm else 0,
        loop_arm_steps_per_job=_rounded(loop_arm, iteration) if loop_arm else 0,
    )  # fmt: skip


def estimated_steps_per_s(spec: RunSpec, confirmed: ConfirmedEnv | None = None) -> float | None:
    """The run's speed in its planned env steps (`RunSpec.budget`) as the chat's cost estimate
    has it: one measured iteration (graph.throughput), the estimate's rounding; None when it
    cannot be measured. `lero run` gives it to its run bar before the first progress report."""
    from lero.graph.throughput import measure_throughput

    try:
        steps_per_s, iteration = measure_throughput(spec, confirmed)
    except ValueError:
        return None
    return spec.budget()[1] / training_estimate(spec, steps_per_s, iteration).train_s


def estimate_in_background(ui: RichUI, spec: RunSpec, typed_env: str | None) -> threading.Thread | None:
    """`lero run` on a terminal: measure the run's estimated speed beside it (one training
    iteration, as the chat's estimate does) and hand it to the run bar (`RichUI.estimate`);
    nothing in a pipe, where there is no bar. An env that cannot be confirmed or measured
    leaves the bar as it was."""
    if not ui.console.is_terminal:
        return None

    def measure() -> None:
        try:
            confirmed = confirm_env(spec.env, typed_env)
        except RunError:
            return
        if (speed := estimated_steps_per_s(spec, confirmed)) is not None:
            ui.estimate(speed)

    thread = threading.Thread(target=measure, daemon=True, name="lero-run-estimate")
    thread.start()
    return thread


FIXED_FIELDS = ("runs_dir",)  # where runs go is the person's command line, not the chat's


class ExperimentDesk:
    """The draft experiment and every action the chat can take on it."""

    def __init__(self, io: Asker, base: dict[str, Any] | None = None) -> None:
        self.io = io
        self.fields = {**DEFAULT_CHAT_SPEC, **(base or {})}
        self.spec = RunSpec.parse(self.fields)
        self._measured: dict[str, tuple[float, int]] = {}  # throughput per env/algo/hparams
        self.last_run_id: str | None = None
        self.confirmed: ConfirmedEnv | None = None  # the spec env the user typed (graph.trust)

    # -- the draft spec

    def set_fields(self, updates: dict) -> str:
        """Change fields of the experiment spec (RunSpec names: env, env_kwargs, algo, generations,
        population, steps, seeds, llm, approve, task, ...). env_kwargs entries are merged.

        Args:
            updates: the fields to change and their new values, e.g. {"generations": 2, "env_kwargs": {"N": 4}}
        """
        return self._update(updates, (*FIXED_FIELDS, *OPERATOR_FIELDS, *OPERATOR_CAPS))

    def _update(self, updates: dict, fixed_fields: tuple[str, ...], by_person: bool = False) -> str:
        fixed = sorted(set(updates) & set(fixed_fields))
        if fixed:
            return f"not changed: {', '.join(fixed)} cannot be changed from the chat"
        fields = self._merged(updates)
        if fields.get("approve") == "none" and not by_person:
            fields["approve"] = "spec"  # the assistant cannot turn approvals off; the person can
        try:
            self.spec = RunSpec.parse(fields)
        except RunError as error:
            return f"not changed: {error}"
        self.fields = fields
        return "updated:\n" + self.show_spec()

    def _merged(self, updates: dict) -> dict[str, Any]:
        fields = {**self.fields, **updates}
        if isinstance(updates.get("env_kwargs"), dict) and "env" not in updates:
            fields["env_kwargs"] = {**self.spec.env_kwargs, **updates["env_kwargs"]}
        return fields

    def field_error(self, updates: dict[str, Any]) -> str | None:
        """Why the spec would refuse UPDATES (one line), None when it takes them; nothing changes."""
        try:
            RunSpec.parse(self._merged(updates))
        except RunError as error:
            return str(error).splitlines()[0]
        return None

    def typed_fields(self, updates: dict[str, Any]) -> str:
        """`set_fields` for what the user typed (`/set`, the guided dialogue): an env they name
        is confirmed by that (graph.trust), and they may choose the sandbox, executor, cluster,
        URL and job limits the assistant's `set_fields` may not (graph.trust.OPERATOR_FIELDS),
        and `approve none`, as `lero run --approve none` takes it."""
        answer = self._update(updates, FIXED_FIELDS, by_person=True)
        if not answer.startswith("not changed") and "env" in updates:
            try:
                self.confirmed = confirm_env(self.spec.env, self.spec.env)
            except RunError as error:
                return f"{answer}\nbut the env cannot be used: {error}"
        return answer

    def show_spec(self, which: str = "") -> str:
        """Show the experiment spec as it stands (what `start_run` would run): the fields that
        differ from `lero run`'s defaults as a short table; `all` shows every field as JSON."""
        shown = self.spec.model_dump(mode="json", exclude={"task"})
        if which == "all":
            return json.dumps(shown, indent=2)
        changed = spec_changes(self.spec)
        if not changed:
            return "spec: lero run's defaults (/spec all shows every field)"
        width = max(len(name) for name, _, _ in changed)
        rows = [f"  {name:<{width}}  {value}  (default {default})" for name, value, default in changed]
        return "\n".join(["spec, the fields that differ from lero run's defaults (/spec all shows every field):", *rows])

    # -- environments and cost

    def list_environments(self) -> str:
        """List the environments and training algorithms available."""
        from lero.training import ALGOS
        from lero.training.envs.registry import registered_envs

        return (
            f"environments: {', '.join(registered_envs())}, or any PettingZoo ParallelEnv as "
            f"package.module:factory\nalgorithms: {', '.join(ALGOS)}"
        )

    def confirmed_env(self) -> ConfirmedEnv | None:
        """The spec env's confirmation: None for an installed env; a `package.module:factory`
        env is imported only once the user typed its name here (a tool call is no person)."""
        env = self.spec.env
        if self.confirmed is not None and self.confirmed.name == env:
            return self.confirmed
        try:
            confirmed = confirm_env(env, None)
        except RunError:
            try:
                typed = self.io.text(f"env {env} is not installed: importing it runs its code on this "
                                     "machine. Type its name to allow that (Enter refuses)")
            except EOFError:
                raise RunError(confirm_hint(env)) from None
            confirmed = confirm_env(env, typed.strip())
        self.confirmed = confirmed
        return confirmed

    def describe_environment(self) -> str:
        """Describe the spec's environment with its current arguments: observation layout,
        actions, reward, world state."""
        from lero.graph.context import read_env

        try:
            return read_env(self.spec, self.confirmed_env())[1]["description"]
        except ValueError as error:
            return f"cannot describe {self.spec.env}: {error}"

    def estimate_cost(self) -> str:
        """Estimate env steps, training time (from a throughput measured on this machine) and
        LLM requests for the current spec."""
        spec = self.spec
        key = json.dumps([spec.env, spec.env_kwargs, spec.algo, spec.hparams], sort_keys=True)
        if key not in self._measured:
            from lero.graph.throughput import measure_throughput

            try:
                self._measured[key] = measure_throughput(spec, self.confirmed_env())
            except ValueError as error:
                return f"cannot estimate: {error}"
        steps_per_s, iteration = self._measured[key]
        cost = training_estimate(spec, steps_per_s, iteration)
        lines = [*cost_lines(spec, cost), f"training time ≈ {cost.train_s / 60:.1f} min at {steps_per_s:,.0f} "
                 f"steps/s measured here ({spec.algo}), plus evaluation and sandbox start-up"]  # fmt: skip
        if spec.llm == "offline":
            lines.append("LLM: offline designer, no model requests")
        else:
            per_candidate = 2 + 2 * spec.critic_rounds + spec.debug_attempts
            lines.append(
                f"LLM: at most ≈ {spec.generations * spec.population * per_candidate} requests "
                f"(design, critique, {spec.critic_rounds} revision rounds, {spec.debug_attempts} "
                "repairs per candidate)"
            )
        return "\n".join(lines)

    # -- running and inspecting

    def start_run(self) -> str:
        """Start the experiment with the current spec, after the user confirms it. Runs to the
        end (or until an approval is declined) and returns how it ended."""
        from lero.app.cli.run_hooks import app_front
        from lero.app.console.progress import RichUI
        from lero.graph.runner import start_run

        if (declined := self.confirm_start()) is not None:
            return declined
        confirmed = self.confirmed_env()
        ui = RichUI(
            console=self.io.console,
            stdin=self.io.stdin,
            interactive=True,
            generations=self.spec.generations,
        )
        with ui:
            outcome = start_run(self.spec, ui, confirm=confirmed.name if confirmed else None, front=app_front())
        self.last_run_id = outcome.run_id
        return f"run {outcome.run_id} ended with status {outcome.status} ({outcome.run_dir})"

    def confirm_start(self) -> str | None:
        """Show the spec and ask to start it: None when the person agrees; else the spec is
        saved (`save_spec`) and the answer says where and the `lero run` command that starts it."""
        self.io.say(self.show_spec(), markup=False)
        if self.io.confirm("Start this experiment?", default=True):
            return None
        saved = self.save_spec()
        return (f"the user did not start the run; the spec is unchanged and saved in {saved}\n"
                f"start it later with: lero run --config {shlex.quote(str(saved))}")

    def save_spec(self, folder: Path | None = None) -> Path:
        """The draft's fields as a `lero run --config` file in FOLDER (the working directory):
        `lero-spec.json`, or `lero-spec-N.json` beside the ones already there (none is overwritten)."""
        folder = folder or Path.cwd()
        payload = json.dumps({k: v for k, v in self.fields.items() if v is not None}, indent=2) + "\n"
        number = 1
        while True:
            path = folder / ("lero-spec.json" if number == 1 else f"lero-spec-{number}.json")
            try:
                with path.open("x") as file:  # exclusive: a file already there is kept
                    file.write(payload)
                return path
            except FileExistsError:
                number += 1

    def _run_dir(self, run_id: str | None) -> tuple[str, Path] | str:
        """(run id, its directory), or the text explaining why there is none."""
        run_id = run_id or self.last_run_id
        if not run_id:
            return "no run id given and no run started in this chat"
        check_run_id(run_id)  # no path parts: the tools stay inside the runs directory
        path = Path(self.spec.runs_dir) / run_id
        if not path.is_dir():
            return f"no run {run_id!r} in {self.spec.runs_dir}/"
        return run_id, path

    def run_status(self, run_id: str | None = None) -> str:
        """Status of a run: status, generations done, best and baseline fitness.

        Args:
            run_id: the run (default: the last run started in this chat)
        """
        from lero.app.reports.run_report import run_row

        found = self._run_dir(run_id)
        if isinstance(found, str):
            return found
        return json.dumps(run_row(found[1]), indent=2)

    def show_candidate(self, candidate_id: str, run_id: str | None = None) -> str:
        """A candidate's code, the critic's review and its training result.

        Args:
            candidate_id: "<generation>-<index>", e.g. "0-1"
            run_id: the run (default: the last run started in this chat)
        """
        if not isinstance(candidate_id, str) or not CANDIDATE_ID.match(candidate_id):
            return f"candidate id {candidate_id!r} must look like 0-1"
        found = self._run_dir(run_id)
        if isinstance(found, str):
            return found
        rundir = RunDir(found[1])
        try:
            if candidate_id not in rundir.candidate_names():
                return f"no candidate {candidate_id!r} in run {found[0]}"
            result = rundir.read_result(candidate_id)
            texts = {CODE_FILE: rundir.read_code(candidate_id), REVIEW_FILE: rundir.read_review(candidate_id),
                     RESULT_FILE: None if result is None else json.dumps(
                         {k: result.get(k) for k in ("status", "fitness", "fitness_std", "eval")}, indent=2)}
        except ValueError as error:  # a file of the run is refused (a symlink, corrupt JSON)
            return f"candidate {candidate_id!r} of run {found[0]} cannot be read: {error}"
        return "\n".join(f"--- {name}\n{text.rstrip()}" for name, text in texts.items() if text is not None)

    def show_report(self, run_id: str | None = None) -> str:
        """Rebuild a run's report and return its summary (report.json).

        Args:
            run_id: the run (default: the last run started in this chat)
        """
        from lero.app.reports.run_report import write_report

        found = self._run_dir(run_id)
        if isinstance(found, str):
            return found
        summary = write_report(found[1])
        return json.dumps(summary, indent=2) + f"\nreport: {RunDir(found[1]).report_md_path}"

    # -- reaching the desk

    TOOL_NAMES = (
        "list_environments", "describe_environment", "estimate_cost", "set_fields", "show_spec",
        "start_run", "run_status", "show_candidate", "show_report",
    )  # fmt: skip

    def tools(self) -> list:
        """The desk as LangChain tools for a tool-calling assistant."""
        from langchain_core.tools import StructuredTool

        return [
            StructuredTool.from_function(getattr(self, name), parse_docstring=True)
            for name in self.TOOL_NAMES
        ]

    def call(self, name: str, args: dict) -> str:
        """Run one tool call; mistakes become text for the assistant, never a crash."""
        if name not in self.TOOL_NAMES:
            return f"unknown tool {name!r}; tools: {', '.join(self.TOOL_NAMES)}"
        try:
            return getattr(self, name)(**args)
        except (TypeError, ValueError) as error:
            return f"error: {error}"

    def command(self, line: str) -> str:
        """A `/command` typed by the user: /spec, /set KEY=VALUE ..., /envs, /describe,
        /estimate, /run, /status [RUN], /candidate ID [RUN], /report [RUN]."""
        from lero.app.cli.args import parse_value

        try:
            name, *words = shlex.split(line[1:]) or ["help"]
        except ValueError as error:  # unbalanced quotes
            return f"cannot parse {line!r}: {error}"
        if name == "set":
            updates: dict[str, Any] = {}
            for word in words:
                key, sep, value = word.partition("=")
                if not sep:
                    return f"expected KEY=VALUE, got {word!r}"
                if key.startswith("env."):
                    updates.setdefault("env_kwargs", {})[key[4:]] = parse_value(value)
                else:
                    updates[key] = parse_value(value)
            return self.typed_fields(updates)
        commands: dict[str, Callable[..., str]] = {
            "spec": self.show_spec,
            "envs": self.list_environments,
            "describe": self.describe_environment,
            "estimate": self.estimate_cost,
            "run": self.start_run,
            "status": self.run_status,
            "candidate": self.show_candidate,
            "report": self.show_report,
        }
        if name not in commands:
            return COMMAND_HELP
        try:
            return commands[name](*words)
        except TypeError:  # wrong number of words for the command
            return COMMAND_HELP
        except ValueError as error:  # e.g. RunError from /run: the chat goes on
            return f"error: {error}"


def _shown(value: object) -> str:
    """A spec value in the table: counts with thousands separators, the rest as JSON."""
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 10_000:
        return f"{value:,}"
    return value if isinstance(value, str) else json.dumps(value)


def spec_changes(spec: RunSpec) -> list[tuple[str, str, str]]:
    """(field, value, default) of every field of SPEC that differs from `lero run`'s defaults;
    env arguments one by one (`env.N`) against the env's own LERO defaults."""
    defaults = RunSpec().model_dump(mode="json", exclude={"task"})
    rows = []
    for name, value in spec.model_dump(mode="json", exclude={"task"}).items():
        if name == "env_kwargs":
            base = RunSpec.default_env_kwargs(spec.env)
            rows += [(f"env.{key}", _shown(v), _shown(base.get(key)) if key in base else "unset")
                     for key, v in value.items() if key not in base or base[key] != v]  # fmt: skip
        elif value != defaults.get(name):
            rows.append((name, _shown(value), _shown(defaults.get(name))))
    return rows


def cost_lines(spec: RunSpec, cost: CostEstimate) -> list[str]:
    """The training jobs and env steps of COST in parts that add up (a test recomputes them)."""
    halving = spec.schedule == "halving"
    rungs = " over the halving's rungs" if halving else ""
    loop = (f"{cost.loop_jobs} in the loop ({spec.generations} generations x {spec.population} candidates{rungs} + "
            f"baseline, x {spec.seeds} seeds) " + (f"of up to {cost.steps_per_job:,} steps = "
            if halving else f"x {cost.steps_per_job:,} steps = ") + f"{cost.loop_steps:,}")  # fmt: skip
    confirm = (f" + {cost.confirm_jobs} confirming ({spec.confirm_top} best + native, x {spec.confirm_seeds} seeds) "
               f"x {cost.confirm_steps_per_job:,} steps = {cost.confirm_jobs * cost.confirm_steps_per_job:,}"
               if cost.confirm_jobs else "")  # fmt: skip
    loop_arm = (f" + {cost.loop_arm_jobs} {LOOP_ARM} (x {spec.confirm_seeds} seeds) x {cost.loop_arm_steps_per_job:,} "
                f"steps = {cost.loop_arm_jobs * cost.loop_arm_steps_per_job:,}" if cost.loop_arm_jobs else "")  # fmt: skip
    asked = f"{spec.steps:,}" + (f" and {spec.confirm_budget():,}" if cost.confirm_jobs else "")
    plan = loop_arm_plan(spec, cost.steps_per_s)
    return [f"{cost.jobs} training jobs: {loop}{confirm}{loop_arm}; {cost.env_steps:,} env steps in all "
            f"({asked} requested per job, rounded up to whole {cost.iteration:,}-step iterations)", *([plan] if plan else [])]


COMMAND_HELP = (
    "commands: /spec [all], /set KEY=VALUE ... (env.N=4 sets an env argument), /envs, /describe, "
    "/estimate, /run, /status [RUN], /candidate ID [RUN], /report [RUN], /quit"
)
