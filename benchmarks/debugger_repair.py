"""Does the debugger repair anything? Its repair rate on planted runtime faults.

The faults (`benchmarks/data/debugger_faults.json`) are a shape mismatch, a wrong dim, a dtype
and a non-finite value, each planted once in an expression candidate (a rendered design, fixed
by a replacement expression) and once in a code module (fixed by a new module). Every planted
module passes the gate and fails the sandbox's validation; the benchmark checks both before it
asks a model. Then per model, as a run does: the debugger gets the module and validation's
error, its fix goes through the gate and validation again, up to the run's bound
(`RunSpec.debug_attempts`). `first_try`: valid after one repair; `within_bound`: after at most
the bound; `own`: an expression repair whose design differs from the planted one (not the same
expression rendered anew).

    python -m benchmarks.debugger_repair --arm smollm2-135m=http://127.0.0.1:8091/v1 \
        [--arm gemma3-270m=URL] [--faults FILE] [--fault ID ...] [--attempts 2] [--sandbox process] \
        [--out results.json]
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from lero.agents import LLMConfig, LLMError, check_candidate, make_team
from lero.agents.checks import state_names
from lero.agents.expression.expression_design import parse_design
from lero.agents.expression.render import render_module
from lero.agents.expression.roles import design_lines
from lero.agents.records import Problem
from lero.graph.configuration import RunSpec
from lero.graph.context import problem
from lero.graph.nodes.validate import error_text
from lero.graph.trust import job_env
from lero.sandbox import VALIDATE, Job, get_sandbox

FAULTS_PATH = Path(__file__).parent / "data" / "debugger_faults.json"
BOUND = RunSpec.model_fields["debug_attempts"].default


@dataclass(frozen=True)
class Planted:
    """One planted fault: the module that fails validation, and where it came from."""

    id: str
    fault: str
    spec: RunSpec
    task: Problem
    code: str
    status: str  # what validation says of it


def load_faults(path: Path = FAULTS_PATH) -> list[Planted]:
    """The faults, each module rendered and planted; ValueError names one whose `replace` does
    not apply exactly once or whose module breaks a static rule (the gate would catch it)."""
    planted, tasks = [], {}
    for raw in json.loads(path.read_text())["faults"]:
        name = raw["id"]
        spec = RunSpec(env=raw["task"])
        task = tasks.get(raw["task"]) or tasks.setdefault(raw["task"], problem(spec, None))
        code = render_module(parse_design(raw["expression"]), task) if "expression" in raw else raw["code"]
        if raw.get("replace"):
            old, new = raw["replace"]
            if code.count(old) != 1:
                raise ValueError(f"{name}: {old!r} is in its module {code.count(old)} times, not once")
            code = code.replace(old, new)
        if violations := check_candidate(code, state_names(task)):
            raise ValueError(f"{name}: the gate would catch it: {violations[0]}")
        planted.append(Planted(name, raw["fault"], spec, task, code, raw["status"]))
    return planted


class Validator:
    """The sandbox's validation job of one candidate, as a run asks it."""

    def __init__(self, sandbox) -> None:
        self.sandbox = sandbox

    def __call__(self, item: Planted, code: str) -> tuple[str, str]:
        """(status, error): `ok` and '' when the module validates."""
        if violations := check_candidate(code, state_names(item.task)):
            return "static", "static check failed:\n" + "\n".join(f"- {v}" for v in violations)
        result = self.sandbox.run_job(Job(kind=VALIDATE.name, code=code, env=job_env(item.spec, None),
                                          algo=item.spec.algo, seed=0))
        return result.status, "" if result.status == "ok" else error_text(result)


def repair(debugger, item: Planted, validate: Validator, attempts: int) -> dict:
    """The debugger's tries on one planted fault, each fix validated, until one is valid."""
    planted, error = validate(item, item.code)
    if planted != item.status:
        raise ValueError(f"{item.id}: the planted module's validation is {planted}, not {item.status}: {error[:200]}")
    said = error.split("\n", 1)[0][:200]
    tries, code, history = [], item.code, []
    for _ in range(attempts):
        try:
            fix = debugger.repair(item.task, code, error, history)
        except LLMError as failed:  # a server too slow or gone: this fault is unanswered, the rest go on
            tries.append({"status": "llm error", "error": str(failed)[:200], "reply": ""})
            break
        if fix.code is None:
            tries.append({"status": "no fix", "error": (fix.error or "")[:200], "reply": fix.reply[:300]})
            break
        history.append((code, error))
        code = fix.code
        status, error = validate(item, code)
        tries.append({"status": status, "error": error.split("\n", 1)[0][:200], "reply": fix.reply[:300],
                      "design": design_lines(code)})
        if status == "ok":
            break
    repaired = bool(tries) and tries[-1]["status"] == "ok"
    planted_design = design_lines(item.code)
    return {"fault": item.fault, "planted": said,
            "first_try": bool(tries) and tries[0]["status"] == "ok", "within_bound": repaired,
            "own": repaired and planted_design is not None and tries[-1]["design"] != planted_design,
            "tries": tries}


def run_arm(debugger, items: list[Planted], validate: Validator, attempts: int,
            progress: Callable[[dict], None] = lambda arm: None) -> dict:
    """The arm's tallies; `progress` gets them after each fault (a slow server's partial result)."""
    started = time.monotonic()
    per_item: dict[str, dict] = {}
    for item in items:
        per_item[item.id] = repair(debugger, item, validate, attempts)
        progress(tally(per_item, attempts, started))
    return tally(per_item, attempts, started)


def tally(per_item: dict[str, dict], attempts: int, started: float) -> dict:
    return {"faults": len(per_item), "first_try": sum(r["first_try"] for r in per_item.values()),
            "within_bound": sum(r["within_bound"] for r in per_item.values()),
            "own": sum(r["own"] for r in per_item.values()), "attempts": attempts,
            "seconds": round(time.monotonic() - started, 1), "per_item": per_item}


def model_debugger(model: str, base_url: str, context_tokens: int | None, timeout_s: float | None = None):
    """The debugger a `--design expression` run with this model builds (code goes to its fallback)."""
    extra = {k: v for k, v in {"context_tokens": context_tokens, "timeout_s": timeout_s}.items() if v}
    return make_team(LLMConfig.from_spec(f"openai:{model}", base_url=base_url, design="expression", **extra)).debugger


def table(arms: dict[str, dict], items: list[Planted]) -> str:
    lines = ["| fault | " + " | ".join(arms) + " |", "|---|" + "---|" * len(arms)]
    for item in items:
        cells = []
        for arm in arms.values():
            r = arm["per_item"][item.id]
            own = ", own expression" if r["own"] else ""
            cells.append(f"repaired, try {len(r['tries'])}{own}" if r["within_bound"]
                         else f"not repaired ({', '.join(t['status'] for t in r['tries']) or 'no try'})")
        lines.append(f"| {item.id} | " + " | ".join(cells) + " |")
    lines.append("| **first try / within bound** | " + " | ".join(
        f"{a['first_try']}/{a['faults']} / {a['within_bound']}/{a['faults']}" for a in arms.values()) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--arm", action="append", default=[], required=True, metavar="MODEL=BASE_URL",
                        help="a model's debugger (repeatable)")
    parser.add_argument("--faults", type=Path, default=FAULTS_PATH, help="the planted faults (JSON)")
    parser.add_argument("--fault", dest="only", action="append", default=[], metavar="ID",
                        help="only this planted fault (repeatable): expression-shape, code-dtype, ...")
    parser.add_argument("--attempts", type=int, default=BOUND, help=f"repairs per fault (a run's bound: {BOUND})")
    parser.add_argument("--context-tokens", type=int, default=None)
    parser.add_argument("--timeout", type=float, default=None, help="seconds per LLM request")
    parser.add_argument("--sandbox", default="process", choices=("process", "docker"))
    parser.add_argument("--out", type=Path, default=None, help="the results as JSON")
    args = parser.parse_args(argv)
    items = load_faults(args.faults)
    if unknown := sorted(set(args.only) - {item.id for item in items}):
        parser.error(f"--fault: no planted fault {', '.join(unknown)} (known: {', '.join(i.id for i in items)})")
    items = [item for item in items if item.id in args.only] if args.only else items
    debuggers = {}
    for arm in args.arm:
        model, sep, url = arm.partition("=")
        if not sep or not model or not url:
            parser.error(f"--arm {arm!r}: expected MODEL=BASE_URL")
        debuggers[model] = model_debugger(model, url, args.context_tokens, args.timeout)
    sandbox = get_sandbox(args.sandbox)
    arms: dict[str, dict] = {}

    def keep(name: str, arm: dict) -> None:
        arms[name] = arm
        if args.out is not None:
            args.out.write_text(json.dumps({"faults_file": str(args.faults), "arms": arms}, indent=1) + "\n")

    try:
        for name, debugger in debuggers.items():
            keep(name, run_arm(debugger, items, Validator(sandbox), args.attempts, lambda arm, name=name: keep(name, arm)))
            print(f"{name}: first try {arms[name]['first_try']}, within bound {arms[name]['within_bound']}", flush=True)
    finally:
        sandbox.close()
    print()
    print(table(arms, items))
    return {"faults_file": str(args.faults), "arms": arms}


if __name__ == "__main__":
    main()
