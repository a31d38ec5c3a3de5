"""`lero` in a pseudo-terminal, the way a person meets it: the README's commands in a
temporary working directory with the default relative `runs/`, the offline designer and the
process sandbox with tiny budgets."""

from __future__ import annotations

import json
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.terminal import Terminal
from tests.support.ui_server import UIServer

FAST = {"eval_episodes": 8, "max_parallel": 1, "hparams": {"n_envs": 8, "rollout_len": 25, "epochs": 1}}
RUN = ["run", "--config", "fast.json", "--steps", "400", "--seeds", "1", "--llm", "offline", "--sandbox", "process"]
# An editor (`EDITOR SEEN FILE`) that breaks the module the first time (the researcher's typo) and, opened again,
# records what it was given and fixes it.
EDITOR = """\
import pathlib, sys
seen, path = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
text = path.read_text()
if "def hybrid_reward(ctx:" in text:
    seen.write_text(text)
    path.write_text(text.replace("def hybrid_reward(ctx:", "def hybrid_reward(ctx") + "# fixed by hand\\n")
else:
    path.write_text(text.replace("def hybrid_reward(ctx", "def hybrid_reward(ctx:", 1))
"""


@pytest.mark.slow
def test_a_refused_edit_says_why_in_the_terminal_and_reopens_as_left(tmp_path: Path) -> None:
    (tmp_path / "fast.json").write_text(json.dumps(FAST))
    (tmp_path / "editor.py").write_text(EDITOR)
    seen = tmp_path / "seen.py"
    editor = f"{sys.executable} {tmp_path / 'editor.py'} {seen}"
    term = Terminal([*RUN, "--approve", "candidates", "--generations", "1", "--population", "1", "--run-id", "t"],
                    tmp_path, env={"EDITOR": editor, "VISUAL": editor})  # fmt: skip
    at = term.expect(r"candidate 0-0 \(1 of 1\)")
    at = term.expect(r"reward terms: \S", at)
    term.expect(r"\[approve/reject/edit/comment/code\] \(approve\): ", at)
    term.send("edit")
    at = term.expect(r"your edit was NOT trained: the gate stopped it", at)
    at = term.expect(r"(?i)syntax", at)  # the gate's reason, on the screen
    term.expect(r"\(approve\): ", at)
    term.send("edit")  # reopens the refused text, which the editor now fixes
    assert term.wait() == 0, term.text[-3000:]
    assert "def hybrid_reward(ctx:" in seen.read_text()  # the person's text came back, not the original
    run = tmp_path / "runs" / "t"
    assert "# fixed by hand" in (run / "candidates/0-0/candidate.py").read_text()
    md = (run / "report.md").read_text()
    assert "| 0 | `0-0` | edit refused by the gate (not trained) |" in md
    # one status and one count of generations in the terminal and report.md (app.reports.run_status)
    assert "- status: **completed**; generations done: 1/1" in md
    listing = Terminal(["runs"], tmp_path, columns=80)
    assert listing.wait() == 0
    rows = [line.split()[:6] for line in listing.text.splitlines()]
    assert ["t", "completed", "1/1", "simple_spread", "mappo", "400"] in rows, listing.text


def test_lero_ui_on_a_busy_port_is_one_line_and_exit_1(tmp_path: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        term = Terminal(["ui", "--port", str(port), "--llm", "offline"], tmp_path)
        code = term.wait()
    lines = [line for line in term.text.splitlines() if line.strip()]
    assert code == 1 and len(lines) == 1, term.text
    assert lines[0].startswith(f"lero: error: cannot serve on 127.0.0.1:{port}: Address already in use")
    assert "--port 0" in lines[0] and "Errno" not in lines[0]


def test_ctrl_c_stops_lero_ui_cleanly(tmp_path: Path) -> None:
    term = Terminal(["ui", "--port", "0", "--llm", "offline"], tmp_path)
    at = term.expect(r"lero ui: serving \S+/runs/ at http://127\.0\.0\.1:\d+/\?token=")
    term.interrupt()
    assert term.wait() == 0, term.text
    assert "lero ui: stopped" in term.text[at:] and "error" not in term.text


@pytest.mark.slow
def test_piped_output_is_one_plain_line_per_finished_job_and_generation(tmp_path: Path) -> None:
    """`lero run ... | tee log`: no bars, no escape codes, no key=value debug records."""
    (tmp_path / "fast.json").write_text(json.dumps(FAST))
    done = subprocess.run([sys.executable, "-m", "lero.app.cli.main", *RUN, "--generations", "1", "--population", "2",
                           "--run-id", "p"], cwd=tmp_path, capture_output=True, text=True, timeout=600)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert "\x1b[" not in done.stdout and not re.search(r"━ +\d+/", done.stdout)  # no escapes, no bars
    assert not [line for line in lines if re.search(r"\w+=\S", line)]  # run_finished status=..., reflection chars=...
    finished = [line for line in lines
                if re.fullmatch(r"train (baseline|0-[01]) seed 0: ok fitness -?\d+\.\d+ in \d+\.\d s", line)]
    assert len(finished) == 3 and sum(line.startswith("generation 0 done: ") for line in lines) == 1


@pytest.mark.slow
def test_the_confirmed_verdict_heads_the_summary_runs_report_and_ui(tmp_path: Path, browser) -> None:
    """A run with a (tiny) confirmation: the terminal's summary opens with the confirmed
    verdict, `lero runs` at 80 columns has it in a column, `lero report` opens with it too, and
    in Chromium the runs list has its column and the run page opens with it, the confirmation
    above the job tables; the loop's numbers stay, labelled as on the selection episodes. While
    it ran, its run bar showed its ETA as `H:MM:SS ±H:MM:SS` (app.console.eta)."""
    (tmp_path / "fast.json").write_text(json.dumps(FAST))
    term = Terminal([*RUN, "--generations", "1", "--population", "1", "--confirm-steps", "800", "--run-id", "c"],
                    tmp_path)  # fmt: skip
    assert term.wait() == 0, term.text[-3000:]
    bars = [(int(done), int(total)) for done, total in re.findall(r"run \(env steps\)\D*?(\d+)/(\d+)", term.text)]
    assert bars and all(done <= total for done, total in bars)  # the run bar never passes its total
    assert bars[-1][1] == 5_600  # 2 loop trainings of 400 steps (seed 0), then 2 arms x 3 seeds x 800 confirming
    assert re.search(r"run \(env steps\).*\d+:\d\d:\d\d ±\d+:\d\d:\d\d", term.text), term.text[-3000:]
    summary = term.text[term.text.index("confirmed at 800 steps on held-out episodes: "):]
    headline = summary.splitlines()[0]
    assert re.fullmatch(r"confirmed at 800 steps on held-out episodes: 0-0 (better|worse) \(return (higher|lower)\), "
                        r"return -?\d+\.\d{3} vs native -?\d+\.\d{3}, 3 seeds per arm: a pilot|confirmed at 800 steps "
                        r"on held-out episodes: 0-0 no difference, .*", headline), headline  # fmt: skip
    assert "run c (completed): the loop, on the selection episodes" in summary
    word = headline.split("0-0 ")[1].split(" (")[0].split(",")[0]
    listing = Terminal(["runs"], tmp_path, columns=80)
    assert listing.wait() == 0
    row = next(line for line in listing.text.splitlines() if line.startswith("c "))
    assert row.split()[:6] == ["c", "completed", "1/1", "simple_spread", "mappo", "400"], listing.text
    assert f" {word}* " in row, listing.text  # the same verdict, flagged as resting on fewer than 5 seeds
    assert max(map(len, listing.text.splitlines())) <= 80
    report = Terminal(["report", "c"], tmp_path)
    assert report.wait() == 0
    assert next(line for line in report.text.splitlines() if line.strip()) == headline
    server = UIServer(tmp_path, "--llm", "offline")
    try:
        page = browser.new_context(viewport={"width": 1280, "height": 900}).new_page()
        page.goto(server.url)
        assert page.locator("#runs tr", has_text="c").locator("td.confirmed").inner_text() == f"{word}*"
        page.click("#runs a:text-is('c')")
        shown = page.locator("#headline")
        assert shown.inner_text().startswith(headline) and shown.bounding_box()["y"] < 300  # at the top
        top = page.evaluate("id => document.getElementById(id).getBoundingClientRect().top", "confirmation")
        assert top < page.evaluate("document.getElementById('live-jobs').getBoundingClientRect().top")
        assert "Fitness (the loop, on the selection episodes)" in page.content()
        # where the time went: a loop step's seconds under "seconds", not under "sandboxes"
        step = page.locator("#time tr.loop-step").first.locator("td").all_inner_texts()
        assert step[0].startswith("loop: ") and step[2] == "" and re.fullmatch(r"\d+\.\d", step[3]), step
        page.wait_for_function("document.getElementById('log').textContent.includes('elapsed_s=')")
        log = page.locator("#log").inner_text()
        assert re.search(r"elapsed_s=\d+\.\d\b", log) and not re.search(r"=-?\d+\.\d{4,}", log), log[-2000:]
    finally:
        server.close()
