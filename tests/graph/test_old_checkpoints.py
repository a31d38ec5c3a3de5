"""A run written before the spec left the graph state still resumes to its end.

`fixtures/old-state.tar.gz` is a real run directory written by lero at 89495f8 (an offline run of
one candidate, `--approve candidates`, stopped at that approval), whose checkpoints keep
the spec as a dict in the state (`state["spec"]`). Today's graph reads the spec from the
runtime context; the stored dict is left where it is and nothing reads it.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from lero.graph.checkpoints import open_saver
from lero.graph.runner import resume_run

FIXTURE = Path(__file__).parent / "fixtures" / "old-state.tar.gz"  # an archive: its candidate.py is no source of ours


class QuietUI:
    def on_event(self, event: dict[str, Any]) -> None:
        """Checked in events.jsonl instead."""

    def ask(self, payload: dict[str, Any]) -> object | None:
        return None


def test_a_checkpoint_with_the_spec_in_its_state_resumes_to_completed(tmp_path):
    runs = tmp_path / "runs"
    shutil.unpack_archive(FIXTURE, runs, filter="data")
    run_dir = runs / "old-state"
    with open_saver(run_dir / "checkpoints.sqlite") as saver:  # the old shape, as written then
        stored = saver.get_tuple({"configurable": {"thread_id": "old-state"}})
    assert stored.checkpoint["channel_values"]["spec"]["population"] == 1

    # an unpacked run is one this installation did not sign: its process sandbox is retyped
    outcome = resume_run("old-state", runs, QuietUI(), answer={"decisions": {}, "default": "approve"},
                         overrides={"sandbox": "process"})

    assert outcome.status == "completed", outcome
    assert json.loads((run_dir / "state.json").read_text())["status"] == "completed"
    for folder in ("baseline", "candidates/0-0"):
        assert json.loads((run_dir / folder / "result.json").read_text())["status"] == "ok"
    report = json.loads((run_dir / "report.json").read_text())
    assert report["best"]["candidate_id"] == "0-0"
