"""The debugger benchmark's planted faults and its scoring (`benchmarks.debugger_repair`): a
scripted server, real validation in the process sandbox; the real models' numbers are the
benchmark's (docs/results.md)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from benchmarks import debugger_repair
from benchmarks.debugger_repair import FAULTS_PATH, load_faults
from lero.agents.expression.roles import design_lines
from lero.agents.grammar_form import PROBE_PROMPT
from tests.support.openai_server import OpenAIServer, Reply

MODEL = "test-model"
ECHOED = ("code-wrong-dim", "code-non-finite")  # the script sends these modules back unchanged
PREFIX = re.compile(r"start it with `([^`]*)`")
SHOWN = re.compile(r"^(?:term|feature|potential)[^\n`]*: `([^`\n]*)`$", re.MULTILINE)


def test_every_fault_is_planted_once_and_passes_the_gate(tmp_path: Path) -> None:
    items = load_faults()
    assert {i.fault for i in items if design_lines(i.code)} == {i.fault for i in items if not design_lines(i.code)} == {
        "shape mismatch", "wrong dim", "dtype", "non-finite value"}
    raw = json.loads(FAULTS_PATH.read_text())
    twice = next(f for f in raw["faults"] if f["id"] == "code-dtype")
    path = tmp_path / "faults.json"
    path.write_text(json.dumps({"faults": [{**twice, "replace": ["ctx", "ctx"]}]}))
    with pytest.raises(ValueError, match="code-dtype: 'ctx' is in its module 5 times, not once"):
        load_faults(path)
    path.write_text(json.dumps({"faults": [{**twice, "replace": ["import torch", "import os"]}]}))
    with pytest.raises(ValueError, match="code-dtype: the gate would catch it"):
        load_faults(path)


def repairing_server(items):
    """Expression repairs: the shown expression again (the module is rendered anew) except for
    the division by zero, whose term becomes `env_reward`; code repairs: the planted module's sound origin,
    except the `ECHOED` ones, sent back as they failed."""
    sound = {i.id: i.code for i in items}
    origins = {f["id"]: f["replace"] for f in json.loads(FAULTS_PATH.read_text())["faults"]}

    def reply(request: dict) -> Reply:
        prompt = request["messages"][-1]["content"]
        if prompt == PROBE_PROMPT:  # the grammar probe: not followed, so repairs go without one
            return Reply(content="hello")
        if "/ (obs[0] - obs[0])" in prompt:  # shown the first term, as the error names no line: both may be replaced
            return Reply(content="term ratio: 0.5 constant = env_reward")
        if prefix := PREFIX.search(prompt):
            return Reply(content=prefix[1] + SHOWN.search(prompt)[1])
        [name] = [n for n, code in sound.items() if not design_lines(code) and origins[n][1] in prompt]
        old, new = origins[name]
        module = sound[name] if name in ECHOED else sound[name].replace(new, old)
        return Reply(content=f"```python\n{module}```")

    return reply


@pytest.mark.slow
def test_repairs_are_validated_counted_and_an_echo_is_no_repair(tmp_path: Path) -> None:
    items = load_faults()
    with OpenAIServer() as server:
        server.script = repairing_server(items)
        out = tmp_path / "debugger.json"
        debugger_repair.main(["--arm", f"{MODEL}={server.base_url}", "--out", str(out)])
        asked = len(server.requests)
    arm = json.loads(out.read_text())["arms"][MODEL]
    per = arm["per_item"]
    assert (arm["faults"], arm["first_try"], arm["within_bound"], arm["own"]) == (8, 6, 6, 1)
    assert [t["status"] for t in per["code-wrong-dim"]["tries"]] == ["no fix"]  # the same module back is none
    assert per["code-non-finite"]["planted"].startswith("invalid_output: HookError") and not per["code-non-finite"]["within_bound"]
    assert per["expression-non-finite"]["own"] and "term ratio: 0.5 constant = env_reward" in per["expression-non-finite"]["tries"][0]["design"]
    assert per["expression-dtype"]["within_bound"] and not per["expression-dtype"]["own"]  # the same expression, rendered anew
    assert asked == 1 + 6 + 2 * 2  # the grammar probe, one ask per repair, two per echo (asked once more)


def test_fault_picks_planted_faults_by_id_and_an_unknown_one_is_a_usage_error(tmp_path: Path, capsys) -> None:
    with pytest.raises(SystemExit) as exit_:
        debugger_repair.main(["--arm", f"{MODEL}=http://127.0.0.1:1/v1", "--fault", "expression-nope"])
    assert exit_.value.code == 2 and "no planted fault expression-nope (known: expression-shape" in capsys.readouterr().err
    with OpenAIServer() as server:
        server.script = repairing_server(load_faults())
        out = tmp_path / "debugger.json"
        debugger_repair.main(["--arm", f"{MODEL}={server.base_url}", "--fault", "expression-dtype", "--out", str(out)])
    arm = json.loads(out.read_text())["arms"][MODEL]
    assert (arm["faults"], list(arm["per_item"]), arm["first_try"]) == (1, ["expression-dtype"], 1)
