"""A terminal-less driver of one run: what the web UI's background workers execute.

    python -m lero.app.cli.worker start --spec spec.json [--env ENV]   # JSON-lines events on stdout
    python -m lero.app.cli.worker resume RUN_ID [--runs-dir DIR] [--answer answer.json] [--env ENV]

The same `start_run` / `resume_run` path as `lero run` and `lero resume --answer`, with
the app's hooks (TensorBoard, report.md); one line on stderr and exit 2 for bad input. A
SIGTERM (how `lero ui` stops its workers) or SIGINT stops the run as Ctrl-C stops `lero run`:
its sandbox jobs killed, the run left `interrupted`, exit 130.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from lero.app.cli.run_hooks import app_front
from lero.app.cli.stops import EXIT_INTERRUPTED, first_stop_cancels
from lero.graph.configuration import DEFAULT_RUNS_DIR, RunError, RunSpec, load_json
from lero.graph.runner import resume_run, start_run


class JsonLinesUI:
    """Events as JSON lines on stdout, answers from a file or none."""

    def __init__(self, answer: object | None = None) -> None:
        self.answer = answer

    def on_event(self, event: dict[str, Any]) -> None:
        print(json.dumps(event, default=str), flush=True)

    def ask(self, payload: dict[str, Any]) -> object | None:
        answer, self.answer = self.answer, None
        return answer


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lero.app.cli.worker", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    start = commands.add_parser("start", help="start a run from a RunSpec JSON file")
    start.add_argument("--spec", required=True, type=Path)
    resume = commands.add_parser("resume", help="resume a run")
    resume.add_argument("run_id")
    resume.add_argument("--runs-dir", default=DEFAULT_RUNS_DIR)
    resume.add_argument("--answer", type=Path, help="JSON answer to the pending approval")
    for command in (start, resume):
        command.add_argument("--env", help="the package.module:factory env a person confirmed (graph.trust)")
    args = parser.parse_args(argv)
    try:
        with first_stop_cancels() as interrupts:  # `lero ui` stops its workers with SIGTERM
            try:
                if args.command == "start":
                    spec = RunSpec.parse(load_json(args.spec.read_text(), f"spec file {args.spec}"))
                    outcome = start_run(spec, JsonLinesUI(), confirm=args.env, front=app_front(interrupts.scope))
                else:
                    answer = load_json(args.answer.read_text(), f"answer file {args.answer}") if args.answer else None
                    outcome = resume_run(args.run_id, args.runs_dir, JsonLinesUI(), answer=answer, confirm=args.env,
                                         front=app_front(interrupts.scope))
            except KeyboardInterrupt:
                interrupts.wait()  # no container outlives the worker
                print("error: interrupted", file=sys.stderr)
                return EXIT_INTERRUPTED
    except RunError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(json.dumps({"outcome": outcome.status, "run_id": outcome.run_id, "run_dir": str(outcome.run_dir)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
