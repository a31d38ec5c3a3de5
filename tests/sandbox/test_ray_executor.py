"""The Ray executor on a real multi-node Ray cluster (`ray.cluster_utils.Cluster`, every
address on loopback) running the real Docker sandbox on each node."""

from __future__ import annotations

import os

# Before Ray is imported: every node, the GCS and ray.init bind to 127.0.0.1.
os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"

import contextlib
import json
import math
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

ray = pytest.importorskip("ray")
from ray.cluster_utils import Cluster  # noqa: E402

from lero.graph.configuration import RunError, RunSpec  # noqa: E402
from lero.graph.protocol import train_and_evaluate_seeds  # noqa: E402
from lero.graph.runner import start_run  # noqa: E402
from lero.sandbox import Job, get_sandbox  # noqa: E402
from lero.sandbox.base import JobCancelled  # noqa: E402
from tests.sandbox.test_contract import VALID  # noqa: E402

NODE = {"num_cpus": 1, "memory": 5 * 2**30, "object_store_memory": 100 * 2**20}
TINY = {  # a few PPO iterations of 32 envs per job
    "generations": 1, "population": 2, "steps": 1600, "seeds": 1, "eval_episodes": 8,
    "hparams": {"n_envs": 32, "rollout_len": 25, "epochs": 1}, "max_parallel": 2,
    "critic_rounds": 0, "debug_attempts": 1, "sandbox": "docker", "executor": "ray",
}


def sandbox_containers() -> list[dict[str, Any]]:
    """Every sandbox container on the engine, in any state, as the list call gives it (`Id`,
    `Labels`): no inspect per container, which fails for one another run removes meanwhile."""
    import docker

    from lero.sandbox.docker_backend import LABEL

    return [c.attrs for c in docker.from_env().containers.list(all=True, filters={"label": LABEL}, sparse=True)]


@pytest.fixture
def earlier_containers(docker_sandbox) -> set[str]:
    """Sandbox containers that exist before the test (the session sandbox's warm spares)."""
    return {c["Id"] for c in sandbox_containers()}


@contextlib.contextmanager
def two_nodes() -> Iterator[tuple[Cluster, Any]]:
    """A head and one worker node (1 CPU each) on this machine; torn down on leaving."""
    cluster = Cluster(initialize_head=True, head_node_args={**NODE, "include_dashboard": False})
    worker = cluster.add_node(**NODE)
    cluster.wait_for_nodes()
    try:
        yield cluster, worker
    finally:
        ray.shutdown()
        cluster.shutdown()


@pytest.fixture
def cluster(earlier_containers):
    """Two nodes of this test's own: for a test that kills one."""
    with two_nodes() as nodes:
        yield nodes


@pytest.fixture(scope="module")
def shared_cluster():
    """Two nodes the tests that leave the cluster as they found it share (a start costs
    seconds); the connection stays between them, as it does between runs of one process."""
    with two_nodes() as nodes:
        yield nodes


class KillingUI:
    """A real RunUI that records stream events and can kill a node from inside the run."""

    def __init__(self, on_event=None) -> None:
        self.events: list[dict[str, Any]] = []
        self.hook = on_event

    def on_event(self, event: dict[str, Any]) -> None:
        self.events.append(event)
        if self.hook is not None:
            self.hook(event)

    def ask(self, payload: dict[str, Any]) -> object | None:
        return None


def run_events(run_dir: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]


def leftover_containers(workers: set[str], earlier: set[str]) -> list[str]:
    """Sandbox containers (any state) that this test left behind: made since it started, by
    this process or by the Ray workers that ran its jobs."""
    from lero.sandbox.docker_backend import OWNER_LABEL

    owners = {*workers, f"{socket.gethostname()}:{os.getpid()}"}
    return [c["Id"] for c in sandbox_containers()
            if (c["Labels"] or {}).get(OWNER_LABEL) in owners and c["Id"] not in earlier]  # fmt: skip


def assert_loopback_only() -> None:
    assert {node["NodeManagerAddress"] for node in ray.nodes()} == {"127.0.0.1"}


def assert_every_candidate_evaluated(run_dir: Path, population: int = TINY["population"]) -> None:
    state = json.loads((run_dir / "state.json").read_text())
    assert state["status"] == "completed"
    baseline = json.loads((run_dir / "baseline" / "result.json").read_text())
    assert baseline["status"] == "ok" and math.isfinite(baseline["fitness"])
    records = [json.loads(p.read_text()) for p in (run_dir / "candidates").glob("*/result.json")]
    assert len(records) == population
    assert all(r["status"] == "ok" and math.isfinite(r["fitness"]) for r in records)


def test_ray_address_needs_the_ray_executor() -> None:
    with pytest.raises(RunError, match="ray_address is only used with executor 'ray'"):
        RunSpec.parse({"ray_address": "auto", "executor": "local"})
    from lero.app.cli.args import build_parser, spec_fields

    args = build_parser().parse_args(["run", "--ray-address", "auto"])
    assert RunSpec.parse(spec_fields(args)).executor == "ray"
    from lero.app.cli.args import executor_fields

    resume = build_parser().parse_args(["resume", "r1", "--executor", "local"])
    assert executor_fields(resume) == {"executor": "local", "ray_address": None}
    with pytest.raises(ValueError, match="executor must be one of"):
        get_sandbox("process", executor="spark")


def test_local_ray_instance_listens_and_advertises_loopback_only() -> None:
    """Without an address lero starts Ray itself; nothing may face the network."""
    script = (
        "import json, ray, psutil\n"
        "from lero.sandbox.ray_executor import connect\n"
        "connect(None)\n"
        "me = psutil.Process()\n"
        "ray_pids = {p.pid for p in me.children(recursive=True)}\n"
        "listening = [c.laddr.ip for c in psutil.net_connections('inet')\n"
        "             if c.status == 'LISTEN' and c.pid in ray_pids]\n"
        "print(json.dumps({'nodes': [n['NodeManagerAddress'] for n in ray.nodes()],\n"
        "                  'listening': listening}))\n"
        "ray.shutdown()\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"}
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                          text=True, timeout=180, check=True)
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert found["nodes"] == ["127.0.0.1"]
    assert found["listening"] and set(found["listening"]) <= {"127.0.0.1", "::ffff:127.0.0.1"}


@pytest.mark.slow
def test_worker_node_killed_mid_job_the_run_still_completes(cluster, earlier_containers, tmp_path) -> None:
    cluster_, worker = cluster
    killed: list[dict[str, Any]] = []

    def kill_worker_mid_training(event: dict[str, Any]) -> None:
        # Progress reaches this callback up to two polls (~1 s) after the node wrote it, so
        # only an early report kills: three quarters of the job (150k steps, several
        # seconds at any speed seen here; the first report, the one that killed, came at
        # 800 steps) are still to run. If no report is that early, nothing is killed and
        # the test fails on `killed`, never on a finished job.
        running_there = (
            event.get("type") == "train_progress" and event.get("node") == worker.node_id
            and 0 < event["done"] <= event["total"] // 4
        )
        if running_there and not killed:
            killed.append(event)
            cluster_.remove_node(worker, allow_graceful=False)

    # one candidate: it and the baseline train side by side, one per node (1 CPU each), so one
    # is on the worker when it dies; after the kill the head trains what is left in turn, and
    # a second candidate would add a third job to that queue
    spec = RunSpec.parse({**TINY, "population": 1, "steps": 200_000, "ray_address": cluster_.address,
                          "run_id": "killed", "runs_dir": str(tmp_path / "runs")})
    outcome = start_run(spec, KillingUI(kill_worker_mid_training))
    run_dir = Path(outcome.run_dir)
    assert killed, "no train job showed progress on the worker node"
    assert_every_candidate_evaluated(run_dir, spec.population)
    log = run_events(run_dir)
    lost_job = killed[0]["job_id"]
    placements = [e for e in log if e["event"] == "job_placed" and e["job_id"] == lost_job]
    assert placements[0]["node"] == worker.node_id
    assert placements[-1]["node"] != worker.node_id and placements[-1]["attempt"] >= 2
    finished = [e for e in log if e["event"] == "job_finished" and e["kind"] == "train"]
    per_candidate = {}
    for e in finished:  # nothing that finished trains again: one train per candidate
        per_candidate.setdefault(e["candidate_id"], []).append(e)
    assert all(len(runs) == 1 and runs[0]["status"] == "ok" for runs in per_candidate.values())
    assert len(per_candidate) == spec.population + 1
    evaluations = [e for e in log if e["event"] == "job_finished" and e["kind"] == "evaluate"]
    assert len(evaluations) == spec.population + 1
    assert all(e["status"] == "ok" for e in evaluations)
    workers = {e["worker"] for e in log if e["event"] == "job_placed"}
    assert leftover_containers(workers, earlier_containers) == []


def test_a_job_no_node_can_hold_is_crashed_not_queued_forever(tmp_path) -> None:
    cluster = Cluster(initialize_head=True, head_node_args={**NODE, "memory": 2**30,
                                                           "include_dashboard": False})
    try:
        sandbox = get_sandbox("process", work_dir=tmp_path, executor="ray",
                              ray_address=cluster.address)
        result = sandbox.run_job(Job(kind="train", code=None, steps=1600, eval_episodes=8))
        sandbox.close()
    finally:
        ray.shutdown()
        cluster.shutdown()
    assert result.status == "crashed" and result.error["type"] == "NoRayNode"
    assert "4096 MB" in result.error["message"]


@pytest.mark.slow
def test_offline_run_spreads_jobs_over_the_cluster_nodes(shared_cluster, earlier_containers, tmp_path) -> None:
    cluster_, _ = shared_cluster
    spec = RunSpec.parse({**TINY, "ray_address": cluster_.address, "run_id": "spread",
                          "runs_dir": str(tmp_path / "runs")})
    outcome = start_run(spec, KillingUI())
    run_dir = Path(outcome.run_dir)
    assert_every_candidate_evaluated(run_dir)
    assert_loopback_only()
    log = run_events(run_dir)
    remote = [e for e in log if e["event"] == "job_finished" and e["kind"] in ("train", "evaluate")]
    assert len(remote) == 2 * (TINY["population"] + 1)  # baseline + candidates, train + evaluate
    assert all(e["status"] == "ok" and not e["cached"] for e in remote)
    cluster_nodes = {node["NodeID"] for node in ray.nodes()}
    assert {e["node"] for e in remote} == cluster_nodes  # both nodes ran jobs
    assert {e["node_ip"] for e in remote} == {"127.0.0.1"}
    validations = [e for e in log if e["event"] == "job_finished" and e["kind"] == "validate"]
    assert validations and all("node" not in e for e in validations)  # validated locally
    workers = {e["worker"] for e in log if e["event"] == "job_placed"}
    assert leftover_containers(workers, earlier_containers) == []


@pytest.mark.slow
def test_cancel_stops_the_ray_task_and_removes_its_container(shared_cluster, earlier_containers, tmp_path) -> None:
    cluster_, _ = shared_cluster
    progress = threading.Event()
    placed: list[dict[str, Any]] = []

    def events(event: str, **fields: Any) -> None:
        if event == "job_placed":
            placed.append(fields)
        if event == "train_progress" and fields["done"] > 0:
            progress.set()

    sandbox = get_sandbox("docker", work_dir=tmp_path / "jobs", events=events, executor="ray",
                          ray_address=cluster_.address)
    job = Job(kind="train", code=None, steps=10_000_000, eval_episodes=8,
              hparams={"n_envs": 32, "rollout_len": 25, "epochs": 1})
    outcome: list[BaseException] = []

    def train() -> None:
        try:
            sandbox.run_job(job)
        except BaseException as error:
            outcome.append(error)

    thread = threading.Thread(target=train)
    thread.start()
    try:
        assert progress.wait(timeout=240), "the train job never reported progress"
        sandbox.cancel()
        thread.join(timeout=60)
        late = late_container(placed[-1]["worker"])
    finally:
        sandbox.close()
    assert not thread.is_alive()
    assert len(outcome) == 1 and isinstance(outcome[0], JobCancelled)
    assert leftover_containers({p["worker"] for p in placed}, earlier_containers) == []
    assert late not in {c["Id"] for c in sandbox_containers()}


def late_container(worker: str) -> str:
    """A container the killed WORKER asked for that reached the daemon after cancel's reap (a
    create in flight when it died), made here: `close` must reap it in its second pass."""
    import docker

    from lero.sandbox.docker_backend import LABEL, OWNER_LABEL
    from lero.sandbox.image import image_tag

    labels = {LABEL: "1", OWNER_LABEL: worker}
    return docker.from_env().containers.create(image_tag(), ["true"], labels=labels).id


def test_interval_checkpoints_travel_back_from_the_node(shared_cluster, tmp_path, monkeypatch, capsys) -> None:
    """A train job's policy/step-<n>/ folders come back from the node like its final weights
    (the same weights as the same job run here), so `lero study --checkpoints` runs on Ray."""
    import torch

    from lero.sandbox.results import checkpoint_dirs
    from tests.support.cli import lero

    job = Job(kind="train", code=None, steps=800, eval_episodes=8, checkpoint_every=200,
              hparams={"n_envs": 8, "rollout_len": 25})  # fmt: skip
    here = get_sandbox("process", work_dir=tmp_path / "here").run_job(job)
    cluster, _ = shared_cluster
    sandbox = get_sandbox("process", work_dir=tmp_path / "ray", executor="ray", ray_address=cluster.address)
    remote = sandbox.run_job(job)
    sandbox.close()
    assert_loopback_only()
    monkeypatch.chdir(tmp_path)
    Path("tiny.json").write_text(json.dumps({"hparams": {"mappo": job.hparams}}))
    Path("cand.py").write_text(VALID)
    code, out, err = lero(["study", "--candidate", "cand.py", "--steps", "400", "--seeds", "1", "--eval-episodes", "8", "--variants", "native",
                 "--sandbox", "process", "--config", "tiny.json", "--checkpoints", "2",
                 "--executor", "ray", "--ray-address", cluster.address, "--study-id", "ck"], capsys)  # fmt: skip
    assert here.status == remote.status == "ok"
    local, shipped = checkpoint_dirs(here.policy_dir), checkpoint_dirs(remote.policy_dir)
    assert list(shipped) == list(local) and set(local) >= {200, 400, 600}
    for step, folder in shipped.items():
        ours = torch.load(local[step] / "policy.pt", weights_only=True)["state_dict"]
        theirs = torch.load(folder / "policy.pt", weights_only=True)["state_dict"]
        assert ours.keys() == theirs.keys() and all(torch.equal(ours[k], theirs[k]) for k in ours)
    assert code == 0, err + out
    (cell,) = json.loads(Path("runs/studies/ck/study.json").read_text())["cells"]
    assert cell["absolute"]["best_steps"][0] in (200, 400) and cell["absolute"]["episodes"] == 80
    record = json.loads(Path("runs/studies/ck/cells/mappo/native/seed-1000.json").read_text())
    assert set(record["checkpoints"]["validation"]) == {"200", "400"}  # a checkpoint and the final policy


def test_a_rungs_learner_state_travels_to_and_from_the_node(shared_cluster, tmp_path) -> None:
    """Successive halving on Ray: the first rung's learner.pt comes back from the node with
    its weights, the next rung ships it out again and continues it there."""
    from lero.training.resume import LEARNER_FILE

    fields = {"code": None, "steps": 1600, "eval_episodes": 8, "hparams": {"n_envs": 8, "rollout_len": 25}}
    cluster, _ = shared_cluster
    sandbox = get_sandbox("process", work_dir=tmp_path, executor="ray", ray_address=cluster.address)
    first = sandbox.run_job(Job(kind="train", stop_at=800, **fields))
    rest = sandbox.run_job(Job(kind="train", resume_dir=first.policy_dir, **fields))
    sandbox.close()
    assert first.status == rest.status == "ok", (first.error, rest.error)
    assert (Path(first.policy_dir) / LEARNER_FILE).is_file()
    assert first.curves["steps"][-1] == 800 and rest.curves["steps"][0] > 800 and rest.curves["steps"][-1] == 1600


def test_a_group_runs_as_its_jobs_on_the_cluster(shared_cluster, tmp_path) -> None:
    """A train (and evaluate) group on Ray runs as its separate jobs, side by side: each
    seed's result comes back with its own weights, as from a local group."""
    cluster, _ = shared_cluster
    fields = {"eval_episodes": 8, "hparams": {"n_envs": 8, "rollout_len": 25}}
    sandbox = get_sandbox("process", work_dir=tmp_path, executor="ray", ray_address=cluster.address)
    results = train_and_evaluate_seeds(sandbox, None, {"name": "simple_spread"}, "mappo", 800, [0, 1], **fields)
    local = train_and_evaluate_seeds(
        get_sandbox("process", work_dir=tmp_path / "local"), None, {"name": "simple_spread"}, "mappo", 800, [0, 1], **fields)
    sandbox.close()
    assert [r.status for r in results] == ["ok", "ok"], [r.error for r in results]
    assert len({Path(r.policy_dir).parent for r in results}) == 2  # two jobs, not one group
    for remote, here in zip(results, local, strict=True):
        assert remote.curves == here.curves and remote.fitness == here.fitness
