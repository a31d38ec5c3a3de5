"""The attack set of tests/sandbox/test_attacks.py as the HRF and OEF of a whole run on a custom env.

A real `start_run` with `--sandbox auto` on the proof env (a module in the working
directory, so Docker on its own layer), designed by the scripted OpenAI-compatible
server: one generation of four candidates whose HRF or OEF runs test_attacks' scripts
(imported, not copied): network to the outside and to a listener on the host, the host's
environment and every process's `environ`, writes to the code, `/etc` and the working
directory, `/proc` and `/sys`, a memory bomb, and a fork bomb (one that waits between
failed forks: it holds every pid for the whole deadline without spinning a core), whose
validation job the host kills at the run's `job_timeout_s` (`--job-timeout`; an hour by default) while the run
goes on. Both static gates (the critic's and the sandbox's) are switched off in this
process: they stand for a hole in the gate, which is what the sandbox is for; the run, the
sandbox, the env and the training are real.

Each attack candidate raises with what its scripts printed, the uid and working directory
and how many processes `/proc` shows, so the proof leaves the job in the candidate's
error; the memory bomb ends its job as `oom`, the fork bomb its validation job as
`timeout`, with no container left.
"""

from __future__ import annotations

import json
import os
import re
import secrets
from pathlib import Path

import docker
import pytest

from lero.graph.configuration import RunSpec
from lero.graph.runner import start_run
from lero.sandbox.docker_backend import OWNER_LABEL, _owner
from lero.sandbox.types import JOB_WALL_S
from tests.graph.test_graph_e2e import RecordingUI
from tests.graph.test_llm_loop import fenced, role
from tests.sandbox.test_attacks import (
    IDLE_FORK_BOMB,
    MEMORY_BOMB,
    NETWORK_EXTERNAL,
    PROC_SYS_SNOOP,
    SECRET_SNOOP,
    Listener,
    code_and_host_targets,
    loopback_attack,
    write_attack,
)
from tests.support.envs import proof_env_source
from tests.support.openai_server import OpenAIServer, Reply

pytestmark = [pytest.mark.slow, pytest.mark.docker]
ENV = "attack_run_env:make_env"
SANDBOX_UID = 10001
JOB_TIMEOUT_S = 60  # the fork bomb's validation job ends here; every honest job of this run takes seconds
HOSTILE = '''import contextlib
import io
import json
import os

ATTACKS = {attacks!r}


def attack():
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        for source in ATTACKS:
            exec(source, {{}})
    pids = [p for p in os.listdir("/proc") if p.isdigit()]
    proof = {{"uid": os.getuid(), "cwd": os.getcwd(), "pids": len(pids), "out": out.getvalue()}}
    raise ValueError("INSIDE " + json.dumps(proof))


def hybrid_reward(ctx):
    {hrf}


def enhance_observation(obs):
    {oef}
'''


def hostile(attacks: list[str], where: str = "hrf") -> str:
    """A candidate module whose HRF (or OEF) runs ATTACKS."""
    hrf, oef = ("attack()", "return obs") if where == "hrf" else ("return ctx.env_reward, {}", "attack()")
    return HOSTILE.format(attacks=attacks, hrf=hrf, oef=oef)


def proof_of(run: Path, candidate: str) -> dict:
    """What the candidate's attack recorded inside its job, from the error the run kept."""
    error = json.loads((run / "candidates" / candidate / "result.json").read_text())["error"]
    found = re.findall(r"INSIDE (\{.*\})", error)
    assert found, f"candidate {candidate} left no proof: {error}"
    return json.loads(found[-1])


def mine() -> set[str]:
    """Ids of the containers this test process owns."""
    found = docker.from_env().containers.list(all=True, filters={"label": f"{OWNER_LABEL}={_owner()}"})
    return {container.id for container in found}


def test_the_attack_set_as_a_runs_hrf_and_oef_on_a_custom_env(sandbox_image, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "attack_run_env.py").write_text(proof_env_source())
    secret = "sk-" + secrets.token_hex(16)
    for name in ("OPENAI_API_KEY", "LERO_TEST_SECRET"):
        monkeypatch.setenv(name, secret)
    monkeypatch.setattr("lero.agents.critic.check_candidate", lambda code, names: [])  # a hole in the gate ...
    monkeypatch.setattr("lero.sandbox.base.static_check", lambda code: [])  # ... and in the sandbox's
    token = secrets.token_hex(4)
    targets = [*code_and_host_targets(token), str(tmp_path / f"pwn_{token}")]
    before = mine()
    with Listener() as listener, OpenAIServer() as server:
        designs = [
            hostile([NETWORK_EXTERNAL, loopback_attack(listener.port), SECRET_SNOOP, write_attack(targets)]),
            hostile([PROC_SYS_SNOOP], where="oef"),
            hostile([MEMORY_BOMB]),
            hostile([IDLE_FORK_BOMB]),
        ]
        server.script = lambda request: (Reply(content=[fenced(designs.pop(0)) for _ in range(int(request.get("n") or 1))])
                                         if role(request) == "designer" else Reply("VERDICT: accept\n- fine"))
        spec = RunSpec.parse({
            "env": ENV, "env_kwargs": {"n_agents": 2}, "generations": 1, "population": 4, "steps": 128, "seeds": 1, "job_timeout_s": JOB_TIMEOUT_S,
            "llm": "openai:test-model", "base_url": server.base_url, "critic_rounds": 0, "debug_attempts": 0, "design": "code",
            "sandbox": "auto", "run_id": "attacks", "runs_dir": str(tmp_path / "runs"), "eval_episodes": 4,
            "hparams": {"n_envs": 8, "rollout_len": 8, "epochs": 1},
        })  # fmt: skip
        outcome = start_run(spec, RecordingUI(), confirm=ENV)
    run = outcome.run_dir
    report = json.loads((run / "report.json").read_text())
    assert outcome.status == report["status"] == "completed"
    assert report["generations"][0]["valid"] == 0 and report["best"]["candidate_id"] is None, report
    assert report["baseline"]["fitness"] is not None  # the run went on around its candidates
    assert json.loads((run / "spec.json").read_text())["sandbox"] == "docker"
    statuses = {cid: json.loads((run / "candidates" / cid / "result.json").read_text())["status"]
                for cid in ("0-0", "0-1", "0-2", "0-3")}
    assert statuses == {"0-0": "code_error", "0-1": "code_error", "0-2": "oom", "0-3": "timeout"}, statuses
    events = [json.loads(line) for line in (run / "events.jsonl").read_text().splitlines()]
    bomb = [e for e in events if e["event"] == "job_finished" and e.get("candidate_id") == "0-3"]
    assert [e["status"] for e in bomb] == ["timeout"] and JOB_TIMEOUT_S <= bomb[0]["elapsed_s"] < JOB_WALL_S
    assert mine() <= before  # the run left no container (another session sandbox's spares may predate it)

    expected_uid = SANDBOX_UID if os.geteuid() == 0 else os.getuid()
    escape, snoop = (proof_of(run, cid) for cid in ("0-0", "0-1"))
    for proof in (escape, snoop):
        assert proof["uid"] == expected_uid and proof["cwd"] == "/job"
    assert "blocked" in escape["out"] and "CONNECTED" not in escape["out"] and listener.received == []
    assert "OMP_NUM_THREADS" in escape["out"] and "LERO_TEST_SECRET" not in escape["out"]  # the job's own environment
    assert "WROTE" not in escape["out"] and escape["out"].count("blocked") >= 4 + len(targets)
    assert not any(Path(target).exists() for target in targets[1:])  # nothing written on the host
    assert snoop["pids"] <= 4 and "pytest" not in snoop["out"] and "net ['lo']" in snoop["out"]  # the OEF's
    leaked = [path for path in run.rglob("*") if path.is_file() and secret.encode() in path.read_bytes()]
    assert leaked == []
