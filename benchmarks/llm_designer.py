"""How often does a model's candidate get through each stage of lero's pipeline?

Per task and round: the designer writes one candidate from lero's real first-generation
prompt (`--design code`: free-form; `edit`: changing a complete module rendered from a
grammar draw; `structured`: one JSON object of the task's design schema, rendered;
`expression`: the design's lines under the task's expression grammar, checked and
rendered); then,
each measured on its own:
- extracted: the reply holds a Python module (`agents.extract`), or for structured design
  an object inside the schema (failures: `not JSON`, `outside the schema`, cut off);
- static: the gate's checks pass (`agents.check_candidate`, with the env's state fields);
- critic: the LLM critic answers `VERDICT: accept` (and, beside it, how often a structured
  critic's revise or reject named no evidence: `no judgement`, after which a run goes on);
- valid first: the sandbox's validation job is `ok` on the designer's code;
- valid after debugger: `ok` after at most `--debug-attempts` LLM debugger repairs (each fed
  the gate's points or the sandbox's error, as a run does).
It also reports the LLM tokens and seconds spent per valid candidate (all requests of the
task, critic and debugger included) and the failure kinds seen.

    python -m benchmarks.llm_designer --base-url http://127.0.0.1:8091/v1 --model smollm2-135m \
        [--tasks simple_spread,simple_reference,simple_speaker_listener] [--rounds 4] \
        [--design code|edit|structured|expression] [--context-tokens 2048] [--record tests/agents/fixtures/smollm2]

`--ablation` instead measures what the model adds over the grammar's random draws
(benchmarks/designer_ablation.py, which lists its own flags).

`--record DIR` keeps every request's role, prompt, reply and finish reason as JSON files
(the test data of tests/agents/test_recorded_replies.py). Validation runs in the process
sandbox (real validation, weaker isolation than Docker): use `--sandbox docker` elsewhere.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from benchmarks import designer_ablation
from lero.agents import Draft, LLMConfig, LLMError, check_candidate, make_team
from lero.agents.checks import state_names
from lero.agents.evidence import NO_JUDGEMENT
from lero.agents.expression.expression_design import design_of, parse_design
from lero.agents.expression.roles import INVALID, example_design
from lero.agents.extract import CUT_OFF
from lero.agents.structured import failure_kind as structured_failure
from lero.graph.configuration import RunSpec
from lero.graph.context import problem
from lero.graph.nodes.validate import error_text
from lero.graph.trust import confirm_env, job_env
from lero.sandbox import VALIDATE, Job, get_sandbox

TASKS = ("simple_spread", "simple_reference", "simple_speaker_listener")
DESIGNS = {"code": "code", "edit": "auto", "structured": "structured", "expression": "expression"}  # -> LLMConfig.design
STAGES = ("extracted", "static", "critic", "valid_first", "valid_after_debugger")


@dataclass
class TaskTally:
    rounds: int = 0
    passed: Counter = field(default_factory=Counter)  # stage -> rounds that passed it
    no_judgement: int = 0  # critic verdicts that named no evidence (agents.evidence)
    novel: int = 0  # expression designs with an expression the prompt's example does not hold
    novel_lines: list[str] = field(default_factory=list)  # those expressions' lines, as the model wrote them
    valid_novel: int = 0  # valid (after the debugger) designs among `novel`
    failures: Counter = field(default_factory=Counter)  # failure kind -> count
    requests: int = 0
    tokens: int = 0
    seconds: float = 0.0


def failure_kind(status: str, error: str) -> str:
    """`code_error: KeyError` style: the sandbox status and the error type."""
    head = error.split("\n", 1)[0]
    parts = [p.strip() for p in head.split(":")]
    return f"{status}: {parts[1]}" if len(parts) > 2 and parts[1] else status


def novel_lines(code: str, task) -> list[str]:
    """The lines of an expression design whose expression is not one of the prompt's example's
    (the model's own writing); none for other code."""
    design = design_of(code)
    shown = {slot.expr for slot in parse_design(example_design(task)).slots}
    return [] if design is None else [slot.line() for slot in design.slots if slot.expr not in shown]


def run_task(name: str, args: argparse.Namespace, cfg: LLMConfig, sandbox, record_dir: Path | None) -> TaskTally:
    spec = RunSpec(env=name, llm=f"openai:{cfg.model}", base_url=cfg.base_url)
    confirmed = confirm_env(name, name) if ":" in name else None  # a PettingZoo factory, as --env confirms it
    task = problem(spec, confirmed)
    env = job_env(spec, confirmed)
    fields = state_names(task)
    calls: list[dict] = []

    def on_call(role: str, info: dict) -> None:
        calls.append(info)
        if record_dir is not None and info.get("status") == "ok":
            path = record_dir / f"{name.split(':')[-1]}-{len(calls):03d}-{role}.json"
            keep = {k: info[k] for k in ("role", "prompt", "replies", "finish_reasons", "prompt_tokens",
                                         "completion_tokens", "tokens_estimated", "elapsed_s", "window")}
            path.write_text(json.dumps({"task": name, "model": cfg.model, **keep}, indent=1) + "\n")

    team = make_team(cfg, on_call=on_call)
    tally = TaskTally()

    def validate(code: str) -> tuple[bool, str]:
        violations = check_candidate(code, fields)
        if violations:
            tally.failures.update(f"static: {v.rule}" for v in violations)
            return False, "static check failed:\n" + "\n".join(f"- {v}" for v in violations)
        result = sandbox.run_job(Job(kind=VALIDATE.name, code=code, env=env, algo=spec.algo, seed=0))
        if result.status == "ok":
            return True, ""
        text = error_text(result)
        tally.failures[failure_kind(result.status, text)] += 1
        return False, text

    for _ in range(args.rounds):
        tally.rounds += 1
        try:
            [draft] = team.designer.design(task, 1, [], "") or [Draft(None, "", None, "designer")]
        except (LLMError, ValueError) as error:
            tally.failures[f"designer request: {str(error)[:60]}"] += 1
            continue
        if draft.code is None:
            kind = structured_failure(draft.error) or ("duplicate" if draft.error is None else
                                                       INVALID if draft.error.startswith(INVALID) else "no code in the reply")
            tally.failures["cut off at max_tokens" if kind == CUT_OFF else kind] += 1
            continue
        tally.passed["extracted"] += 1
        own = novel_lines(draft.code, task)
        tally.novel += bool(own)
        tally.novel_lines += own
        static_ok = not check_candidate(draft.code, fields)
        tally.passed["static"] += static_ok
        review = team.critic.review(task, draft.code)
        tally.passed["critic"] += review.verdict == "accept"
        tally.no_judgement += review.verdict == NO_JUDGEMENT
        ok, error = validate(draft.code)
        tally.passed["valid_first"] += ok
        code, history = draft.code, []
        for _attempt in range(args.debug_attempts):
            if ok:
                break
            fix = team.debugger.repair(task, code, error, history)
            if fix.code is None:
                tally.failures[f"debugger: {fix.error}"] += 1
                break
            history.append((code, error))
            code = fix.code
            ok, error = validate(code)
        tally.passed["valid_after_debugger"] += ok
        tally.valid_novel += ok and bool(own)
    ok_calls = [c for c in calls if c.get("status") == "ok"]
    tally.requests = len(calls)
    tally.tokens = sum(c["prompt_tokens"] + c["completion_tokens"] for c in ok_calls)
    tally.seconds = sum(c["elapsed_s"] for c in calls)
    return tally


def table(tallies: dict[str, TaskTally], model: str, design: str) -> str:
    lines = [
        f"Model: `{model}`, design `{design}`. Rates are of {next(iter(tallies.values())).rounds} rounds per task.",
        "",
        "| task | extracted | static check | critic accepted | valid first try | valid after debugger "
        "| critic no judgement | model-written expression | requests | s / request | tokens / valid | s / valid |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, t in tallies.items():
        rates = " | ".join(f"{t.passed[s] / t.rounds:.0%}" for s in STAGES)
        valid = t.passed["valid_after_debugger"]
        per_valid = (f"{t.tokens / valid:,.0f} | {t.seconds / valid:,.0f}") if valid else "n/a (none valid) | n/a"
        per_request = t.seconds / t.requests if t.requests else 0.0
        lines.append(f"| {name} | {rates} | {t.no_judgement / t.rounds:.0%} | {t.novel / t.rounds:.0%} | {t.requests} | {per_request:.1f} | {per_valid} |")
    return "\n".join(lines)


def main() -> None:
    if "--ablation" in sys.argv[1:]:  # what the model adds: its own flags (benchmarks/designer_ablation.py)
        designer_ablation.main([arg for arg in sys.argv[1:] if arg != "--ablation"])
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base-url", required=True)
    parser.add_argument("--model", required=True)
    parser.add_argument("--tasks", default=",".join(TASKS),
                        help="env names; a PettingZoo package.module:factory is confirmed as --env confirms it")
    parser.add_argument("--design", default="code", choices=tuple(DESIGNS),
                        help="code: free-form modules; edit: change a complete module; structured: the design schema; "
                             "expression: expressions under the task's grammar")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--debug-attempts", type=int, default=1)
    parser.add_argument("--context-tokens", type=int, default=None)
    parser.add_argument("--reply-tokens", type=int, default=None)
    parser.add_argument("--timeout", type=float, default=None, help="seconds per LLM request")
    parser.add_argument("--sandbox", default="process", choices=("process", "docker"))
    parser.add_argument("--record", type=Path, default=None, help="keep every request and reply here")
    parser.add_argument("--out", type=Path, default=None, help="the results as JSON")
    args = parser.parse_args()
    optional = {"context_tokens": args.context_tokens, "reply_tokens": args.reply_tokens, "timeout_s": args.timeout}
    cfg = LLMConfig.from_spec(f"openai:{args.model}", base_url=args.base_url, design=DESIGNS[args.design],
                              **{k: v for k, v in optional.items() if v is not None})
    if args.record is not None:
        args.record.mkdir(parents=True, exist_ok=True)
    sandbox = get_sandbox(args.sandbox)
    started = time.monotonic()
    tallies = {}
    try:
        for name in args.tasks.split(","):
            tallies[name] = run_task(name, args, cfg, sandbox, args.record)
            print(f"{name}: {dict(tallies[name].passed)}; failures {dict(tallies[name].failures)}", flush=True)
    finally:
        sandbox.close()
    print()
    print(table(tallies, args.model, args.design))
    print(f"\nwall {time.monotonic() - started:.0f} s")
    if args.out is not None:
        payload = {name: {"rounds": t.rounds, "passed": dict(t.passed), "failures": dict(t.failures),
                          "no_judgement": t.no_judgement, "novel": t.novel, "novel_lines": t.novel_lines,
                          "valid_novel": t.valid_novel,
                          "requests": t.requests, "tokens": t.tokens, "seconds": round(t.seconds, 1)}
                   for name, t in tallies.items()}
        args.out.write_text(json.dumps({"model": args.model, "design": args.design, "tasks": payload}, indent=2) + "\n")


if __name__ == "__main__":
    main()
