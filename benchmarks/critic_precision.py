"""Is the critic's rejection worth anything? Precision and recall on a labelled set of designs.

The set (`benchmarks/data/critic_set.json`) holds sound designs and designs with one flaw of
the critic's rubric (`agents/prompts/critic_rubric.md`) planted each, as expression designs
(rendered by lero, as `--design expression` makes them) and as code modules. Every arm reviews
every design once:
- `static`: the gate alone (`Critic(None)`: the contract's and the critic's static rules);
- `evidence` (with `--evidence`): the gate, then the evidence rules on the design's validation
  rollout (`agents.evidence_rules`), run in the sandbox (`--sandbox`, process by default, as
  `benchmarks.debugger_repair`) as a run validates it: what a run sends back before training;
- each `--arm MODEL=BASE_URL`: the structured, evidence-bound critic of a run in expression
  mode (`Critic(model, structured=True)`, temperature 0).

A rejection is a `revise` or `reject` that stands (a verdict with no valid point is
`no judgement` and lets the candidate go on, so it is no rejection). Precision: rejected
designs that carry a flaw / rejected designs; recall: flawed designs rejected / flawed
designs; `named`: rejections whose evidence names the planted rubric item.

    python -m benchmarks.critic_precision --arm smollm2-135m=http://127.0.0.1:8091/v1 \
        [--arm gemma3-270m=URL] [--evidence [--sandbox process|docker]] [--set FILE] [--context-tokens 2048]
        [--out results.json]
"""

from __future__ import annotations

import argparse
import json
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from lero.agents import LLMConfig, LLMError, make_team
from lero.agents.critic import Critic
from lero.agents.evidence import rubric_items
from lero.agents.evidence_rules import evidence_points
from lero.agents.expression.expression_design import parse_design
from lero.agents.expression.parse import ExpressionError
from lero.agents.expression.render import render_module
from lero.agents.records import Problem, Review, code_digest
from lero.graph.configuration import RunSpec
from lero.graph.context import problem
from lero.graph.nodes.validate import error_text
from lero.graph.trust import job_env
from lero.sandbox import VALIDATE, Job, Sandbox, get_sandbox

SET_PATH = Path(__file__).parent / "data" / "critic_set.json"
REJECTIONS = ("revise", "reject")
STATIC = "static"
EVIDENCE = "evidence"


@dataclass(frozen=True)
class Labelled:
    """One design of the set: its module as lero reviews it, and its planted flaw (None: sound)."""

    id: str
    task: Problem
    code: str
    flaw: str | None
    target: str | None
    spec: RunSpec  # the run the design would be a candidate of (its env's arguments)


def load_set(path: Path = SET_PATH) -> list[Labelled]:
    """The set, each design rendered (expressions) or taken as written (code); ValueError names
    a design that is no well-formed item (unknown rubric item, a flaw without its target, a
    target not in the design)."""
    items, tasks = [], {}
    for raw in json.loads(path.read_text())["designs"]:
        name, flaw, target = raw["id"], raw.get("flaw"), raw.get("target")
        given = {"env_kwargs": raw["env_kwargs"]} if "env_kwargs" in raw else {}  # a task's own arguments
        spec = RunSpec(env=raw["task"], **given)
        key = (raw["task"], json.dumps(given, sort_keys=True))
        task = tasks.get(key) or tasks.setdefault(key, problem(spec, None))
        if "expression" in raw:
            try:
                design = parse_design(raw["expression"], task.task_spec.metric_names)
                code = render_module(design, task)
            except ExpressionError as error:
                raise ValueError(f"{name}: {error}") from None
            present = target is None or design.slot(target) is not None
        else:
            code = raw["code"]
            present = target is None or target in code
        if flaw is not None and (flaw not in rubric_items() or target is None):
            raise ValueError(f"{name}: flaw {flaw!r} needs a rubric item ({', '.join(rubric_items())}) and a target")
        if not present:
            raise ValueError(f"{name}: target {target!r} is not in the design")
        items.append(Labelled(name, task, code, flaw, target, spec))
    return items


def rejected(review: Review) -> bool:
    """A rejection that stands: `no judgement` lets the candidate go on."""
    return review.verdict in REJECTIONS


def named(review: Review, item: Labelled) -> bool:
    """The rejection's evidence names the planted rubric item."""
    return rejected(review) and any(p.rubric_item == item.flaw for p in review.evidence)


def score(items: list[Labelled], reviews: list[Review]) -> dict:
    """Precision, recall and counts of one arm's reviews (in the items' order)."""
    flawed = [item.flaw is not None for item in items]
    rejects = [rejected(r) for r in reviews]
    true = sum(f and r for f, r in zip(flawed, rejects, strict=True))
    false = sum(r and not f for f, r in zip(flawed, rejects, strict=True))
    return {
        "designs": len(items), "flawed": sum(flawed), "rejected": sum(rejects),
        "true_rejections": true, "false_rejections": false,
        "precision": true / (true + false) if true + false else None,
        "recall": true / sum(flawed) if any(flawed) else None,
        "named": sum(named(r, i) for r, i in zip(reviews, items, strict=True)),
        "no_judgement": sum(r.verdict not in (*REJECTIONS, "accept") for r in reviews),
        "decided_by": dict(Counter(r.by for r in reviews)),  # a model arm's `gate`: designs its model never read
        "per_item": {item.id: {"flaw": item.flaw, "verdict": r.verdict, "by": r.by, "points": r.points}
                     for item, r in zip(items, reviews, strict=True)},
    }


Reviewer = Callable[[Labelled], Review]  # one arm's verdict on a labelled design


def critic_reviewer(critic: Critic) -> Reviewer:
    return lambda item: critic.review(item.task, item.code)


def evidence_reviewer(sandbox: Sandbox) -> Reviewer:
    """The gate, then the design's validation rollout in SANDBOX read by the evidence rules:
    a revise with the points as evidence, else accept (a design that fails validation is
    `invalid`, no rejection of the critic's)."""
    gate = Critic(None)

    def review(item: Labelled) -> Review:
        static = gate.review(item.task, item.code)
        if static.verdict != "accept":
            return static
        result = sandbox.run_job(Job(kind=VALIDATE.name, code=item.code, env=job_env(item.spec, None),
                                     algo=item.spec.algo, seed=0))
        if result.status != "ok":
            return Review(verdict="accept", points=[f"invalid: {error_text(result)}"], text="", by=EVIDENCE)
        points = evidence_points(item.task, item.code, result.evidence)
        return Review(verdict="revise" if points else "accept", points=[p.line() for p in points], text="",
                      code_sha=code_digest(item.code), by=EVIDENCE, evidence=tuple(points))

    return review


def run_arm(review: Reviewer, items: list[Labelled], progress: Callable[[dict], None] = lambda arm: None) -> dict:
    """The arm's score over the designs its reviewer answered (`unanswered`: those whose request
    failed, a server too slow or gone); `progress` gets it after each design."""
    started = time.monotonic()
    answered: list[tuple[Labelled, Review]] = []
    unanswered: list[str] = []

    def scored() -> dict:
        done = [item for item, _ in answered]
        return {**score(done, [review for _, review in answered]), "unanswered": list(unanswered),
                "seconds": round(time.monotonic() - started, 1)}

    for item in items:
        try:
            answered.append((item, review(item)))
        except LLMError:
            unanswered.append(item.id)
        progress(scored())
    return scored()


def model_critic(model: str, base_url: str, context_tokens: int | None, timeout_s: float | None = None) -> Critic:
    """The critic a `--design expression` run with this model builds."""
    extra = {k: v for k, v in {"context_tokens": context_tokens, "timeout_s": timeout_s}.items() if v}
    cfg = LLMConfig.from_spec(f"openai:{model}", base_url=base_url, design="expression", **extra)
    return make_team(cfg).critic


def table(arms: dict[str, dict]) -> str:
    def rate(value: float | None) -> str:
        return "n/a" if value is None else f"{value:.2f}"

    lines = ["| arm | decided by | rejected | true / false rejections | precision | recall | named the planted item "
             "| no judgement | s |", "|---|---|---|---|---|---|---|---|---|"]
    for name, a in arms.items():
        deciders = ", ".join(f"{who} {count}" for who, count in sorted(a["decided_by"].items()))
        lines.append(f"| {name} | {deciders} | {a['rejected']}/{a['designs']} | {a['true_rejections']} / "
                     f"{a['false_rejections']} | {rate(a['precision'])} | {rate(a['recall'])} "
                     f"({a['true_rejections']}/{a['flawed']}) | {a['named']} | {a['no_judgement']} | {a['seconds']} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--arm", action="append", default=[], metavar="MODEL=BASE_URL",
                        help="a model's critic (repeatable); the static rules are always an arm")
    parser.add_argument("--evidence", action="store_true", help="add the evidence rules' arm (validation rollouts)")
    parser.add_argument("--sandbox", default="process", choices=("process", "docker"), help="where --evidence validates")
    parser.add_argument("--set", type=Path, default=SET_PATH, help="the labelled designs (JSON)")
    parser.add_argument("--context-tokens", type=int, default=None)
    parser.add_argument("--timeout", type=float, default=None, help="seconds per LLM request")
    parser.add_argument("--out", type=Path, default=None, help="the results as JSON")
    args = parser.parse_args(argv)
    items = load_set(args.set)
    critics = {STATIC: critic_reviewer(Critic(None))}
    for arm in args.arm:
        model, sep, url = arm.partition("=")
        if not sep or not model or not url:
            parser.error(f"--arm {arm!r}: expected MODEL=BASE_URL")
        critics[model] = critic_reviewer(model_critic(model, url, args.context_tokens, args.timeout))
    sandbox = get_sandbox(args.sandbox) if args.evidence else None
    if sandbox is not None:
        critics[EVIDENCE] = evidence_reviewer(sandbox)
    arms: dict[str, dict] = {}

    def keep(name: str, arm: dict) -> None:
        arms[name] = arm
        if args.out is not None:
            args.out.write_text(json.dumps({"set": str(args.set), "arms": arms}, indent=1) + "\n")

    try:
        for name, review in critics.items():
            keep(name, run_arm(review, items, lambda arm, name=name: keep(name, arm)))
            print(f"{name}: precision {arms[name]['precision']}, recall {arms[name]['recall']}", flush=True)
    finally:
        if sandbox is not None:
            sandbox.close()
    print()
    print(table(arms))
    return {"set": str(args.set), "arms": arms}


if __name__ == "__main__":
    main()
