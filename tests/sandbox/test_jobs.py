"""Jobs through the in-sandbox runner: statuses, trimmed tracebacks, and score integrity.

`static_check=False` jobs run code the static check would reject, to test the sandbox
boundary itself (a candidate that got past the check).
"""

from __future__ import annotations

import secrets
import shutil
import time
from pathlib import Path

import pytest
import torch

from lero.graph.protocol import train_and_evaluate
from lero.sandbox import get_sandbox
from lero.sandbox.types import JOB_PROCESS_ENV, Job, Limits
from lero.training import Policy, PolicyMeta, make_env, save_policy
from tests.sandbox.test_attacks import DEADLINE_MARGIN_S
from tests.sandbox.test_contract import VALID

ENV = {"name": "simple_spread", "N": 3, "num_agent_neighbors": 1, "num_landmark_neighbors": 2}
LIMITS = Limits(wall_s=30, mem_mb=1024, cpus=1, pids=64, output_bytes=8192, disk_mb=64)
EVAL_EPISODES = 512  # 1536 rows per OEF call: more than a pipe buffer

HONEST_OEF = """import torch

def hybrid_reward(ctx):
    return ctx.env_reward, {}

def enhance_observation(obs):
    return torch.cat([obs, obs[:, :1] * 0.5], dim=-1)
"""


def job(kind: str, code: str | None, **fields) -> Job:
    return Job(kind=kind, code=code, env=ENV, limits=fields.pop("limits", LIMITS), **fields)


def own(sandbox, policy_dir: Path) -> str:
    """POLICY_DIR copied into the sandbox's job directories: evaluate reads weights only there."""
    target = sandbox.work_dir / "given-policy"
    if not target.exists():
        shutil.copytree(policy_dir, target)
    return str(target)


@pytest.fixture(scope="module")
def policy_dir(tmp_path_factory) -> Path:
    """An untrained policy for obs_dim + 1 (the HONEST_OEF width): evaluation needs no training."""
    env = make_env(ENV["name"], 1, **{k: v for k, v in ENV.items() if k != "name"})
    torch.manual_seed(0)
    meta = PolicyMeta(
        algo="mappo", obs_dim=env.obs_dim + 1, n_agents=env.n_agents, n_actions=env.n_actions,
        hidden=16, env=ENV["name"], env_kwargs={k: v for k, v in ENV.items() if k != "name"},
    )  # fmt: skip
    directory = tmp_path_factory.mktemp("policy")
    directory.chmod(0o755)
    save_policy(Policy(meta), directory)
    (directory / "policy.pt").chmod(0o644)
    return directory


def test_validate_ok_reports_dims(sandbox) -> None:
    result = sandbox.run_job(job("validate", VALID))
    assert result.status == "ok", result.error
    assert result.metrics["enhanced_obs_dim"] == result.metrics["obs_dim"] + 2
    assert result.fitness is None


def test_static_check_rejects_without_running(sandbox) -> None:
    marker = "marker-" + secrets.token_hex(4)
    code = f"import os\nos.mkdir('/tmp/{marker}')\n" + VALID
    result = sandbox.run_job(job("validate", code))
    assert result.status == "rejected"
    assert "import of 'os'" in result.error["message"]
    assert not Path(f"/tmp/{marker}").exists()


def test_candidate_exception_gives_trimmed_traceback(sandbox) -> None:
    code = VALID.replace(
        "    team = ctx.env_reward\n", "    team = ctx.env_reward\n    team = team[0, 99]\n"
    )
    result = sandbox.run_job(job("validate", code))
    assert result.status == "code_error"
    assert result.error["type"] == "IndexError"
    trace = result.error["traceback"]
    assert 'File "candidate.py", line 16, in hybrid_reward' in trace
    assert "team = team[0, 99]" in trace
    assert "sandbox" not in trace and "training" not in trace


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        ("    return out\n", "    return out[:, 1:]\n"),
        ("    return out\n", "    return out.long()\n"),
        ("    return out\n", "    return out / 0\n"),
    ],
)
def test_bad_oef_output_is_invalid_output(process_sandbox, change: str, problem: str) -> None:
    result = process_sandbox.run_job(job("validate", VALID.replace(change, problem)))
    assert result.status == "invalid_output", result.error
    assert "enhance_observation" in result.error["message"]


# A Python loop over the batch rows, 8 torch ops a row: about 300x the env's step on 1024
# envs x 3 agents, ten times the 30x budget, so no machine's speed or load can pass it.
SLOW_OEF = VALID.replace(
    "    return out\n",
    "    for row in range(out.shape[0]):\n        for _ in range(8):\n"
    "            out[row, -1] = out[row, -1] * 1.0 + out[row, 0]\n    return out\n",
)


def test_slow_python_loop_is_invalid_output(process_sandbox) -> None:
    result = process_sandbox.run_job(job("validate", SLOW_OEF))
    assert result.status == "invalid_output"
    assert result.error["type"] == "TooSlow"
    assert "the environment's own step" in result.error["message"]


def test_a_too_slow_verdict_is_never_cached(tmp_path) -> None:
    cached = get_sandbox("process", cache_dir=tmp_path / "cache")
    try:
        first, again = (cached.run_job(job("validate", SLOW_OEF)) for _ in range(2))
        honest = [cached.run_job(job("validate", VALID)) for _ in range(2)]
    finally:
        cached.close()
    assert first.error["type"] == again.error["type"] == "TooSlow"
    assert not again.cached  # measured again, not served from the cache
    assert honest[0].status == "ok" and honest[1].cached  # other verdicts still are
    assert {"env_step_s", "hybrid_reward_step_ratio", "enhance_observation_step_ratio"} <= set(honest[0].metrics)


def test_job_timeout_and_oom(sandbox) -> None:
    endless = job(
        "validate",
        VALID + "\nwhile True:\n    pass\n",
        static_check=False,
        limits=Limits(wall_s=6, mem_mb=1024),
    )
    started = time.monotonic()
    assert sandbox.run_job(endless).status == "timeout"
    assert time.monotonic() - started <= 6 + DEADLINE_MARGIN_S
    bomb = VALID.replace(
        "    return out\n", "    hog = [torch.ones(10**8) for _ in range(100)]\n    return out\n"
    )
    assert sandbox.run_job(job("validate", bomb)).status == "oom"


def test_host_secret_absent_from_job_results(sandbox, monkeypatch) -> None:
    secret = "sk-" + secrets.token_hex(16)
    monkeypatch.setenv("OPENAI_API_KEY", secret)
    leak = "import os\n" + VALID.replace(
        "    team = ctx.env_reward\n", "    raise ValueError(str(dict(os.environ)))\n"
    )
    result = sandbox.run_job(job("validate", leak, static_check=False))
    assert result.status == "code_error"
    assert "OMP_NUM_THREADS" in result.error["message"]  # the environment was printed ...
    assert all(f"'{key}': '{value}'" in result.error["message"] for key, value in JOB_PROCESS_ENV.items())
    assert secret not in str(result.to_dict())  # ... and the host's key is not in it


def test_result_json_symlink_is_not_followed(sandbox) -> None:
    code = "import os\n" + VALID.replace(
        "    team = ctx.env_reward\n",
        "    os.symlink('/etc/passwd', 'result.json')\n    os._exit(0)\n",
    )
    result = sandbox.run_job(job("validate", code, static_check=False))
    assert result.status == "crashed"
    assert "root:" not in str(result.to_dict())


CHEATS = {
    "writes result.json": (
        "import json, os\n"
        "for d in ('/job', os.environ.get('TMPDIR', '/tmp'), os.getcwd()):\n"
        "    try:\n        json.dump({'status': 'ok', 'fitness': 1e9, 'metrics': {'return': 1e9}}, open(d + '/result.json', 'w'))\n"
        "    except OSError:\n        pass\n"
    ),
    "monkeypatches evaluate and torch": (
        "import sys, torch\n"
        "for name in ('lero.training', 'lero.training.evaluation'):\n"
        "    if name in sys.modules:\n        sys.modules[name].evaluate = lambda *a, **k: {'return': 1e9}\n"
        "torch.Tensor.mean = lambda self, *a, **k: torch.tensor(1e9)\n"
    ),
    "prints fake JSON": 'print(\'{"status": "ok", "fitness": 1e9, "metrics": {"return": 1e9}}\')\n',
    "leaves a process that rewrites the result": (
        "import os, subprocess, sys\n"
        "code = 'import json, time\\nfor _ in range(200):\\n    time.sleep(0.05)\\n    "
        'open("/job/result.json", "w").write(json.dumps({"status": "ok", "fitness": 1e9}))\'\n'
        "subprocess.Popen([sys.executable, '-c', code], start_new_session=True)\n"
    ),
}
# The runner is the worker's parent: PID 1 of the container or of the process backend's PID
# namespace (getppid(), so that a backend without namespaces never signals the host's init).
RUNNER_SIGNALS = ("SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT", "SIGUSR1", "SIGALRM")
CHEATS.update(
    {
        f"writes result.json, then sends {name} to the runner": (
            "import json, os, signal, time\n"
            "json.dump({'status': 'ok', 'fitness': 1e9, 'metrics': {'return': 1e9}}, open('result.json', 'w'))\n"
            f"os.kill(os.getppid(), signal.{name})\ntime.sleep(0.2)\n"
        )
        for name in RUNNER_SIGNALS
    }
)


@pytest.fixture(scope="module")
def honest_results() -> dict:
    """Honest evaluation per backend, computed once (module-wide cache keyed by backend)."""
    return {}


@pytest.mark.parametrize("cheat", sorted(CHEATS))
def test_candidate_cannot_change_its_score(
    sandbox, policy_dir: Path, honest_results: dict, cheat: str
) -> None:
    if sandbox.kind not in honest_results:
        honest_job = job(
            "evaluate", HONEST_OEF, policy_dir=own(sandbox, policy_dir), eval_episodes=EVAL_EPISODES
        )
        honest_results[sandbox.kind] = sandbox.run_job(honest_job)
    honest = honest_results[sandbox.kind]
    assert honest.status == "ok", honest.error
    assert honest.fitness == honest.metrics["return"] < 0
    cheating = CHEATS[cheat] + HONEST_OEF.replace(
        "    return torch.cat", "    print('{\"fitness\": 1e9}')\n    return torch.cat"
    )
    result = sandbox.run_job(
        job(
            "evaluate",
            cheating,
            policy_dir=own(sandbox, policy_dir),
            eval_episodes=EVAL_EPISODES,
            static_check=False,
        )
    )
    assert result.status == "ok", result.error
    assert result.fitness == honest.fitness
    assert result.metrics == honest.metrics


# What an OEF can read while evaluated (the runner is PID 1 there, non-dumpable), each
# searched for the job's key (64 hex digits) to seal a forged result with.
LEAKS = {
    "job.json": "open('job.json', 'rb').read()",
    "stdin": "os.read(0, 4096)",
    "/proc/1/environ": "open('/proc/1/environ', 'rb').read()",
    "/proc/1/cmdline": "open('/proc/1/cmdline', 'rb').read()",
    "/proc/1/mem": "b''.join(read_region(line) for line in open('/proc/1/maps'))",
    "/proc/1/fd": "b''.join(read_fd(name) for name in os.listdir('/proc/1/fd'))",
}
FORGE_FROM = """import hashlib, hmac, json, os, re

def read_region(line):
    start, end = (int(x, 16) for x in line.split()[0].split('-'))
    try:
        with open('/proc/1/mem', 'rb') as mem:
            mem.seek(start)
            return mem.read(min(end - start, 2**24))
    except (OSError, OverflowError):
        return b''

def read_fd(name):
    fd = os.open('/proc/1/fd/' + name, os.O_RDONLY | os.O_NONBLOCK)
    try:
        return os.read(fd, 65536)
    except OSError:
        return b''
    finally:
        os.close(fd)

try:
    leaked = LEAK
except OSError as error:
    leaked = str(error).encode()
found = re.findall(rb'[0-9a-f]{64}', leaked)
nonce = found[0].decode() if found else ''
forged = {'status': 'ok', 'fitness': 1e9, 'metrics': {'return': 1e9}, 'nonce': nonce}
canonical = json.dumps(forged, sort_keys=True, separators=(',', ':')).encode()
forged['seal'] = hmac.new(nonce.encode(), canonical, hashlib.sha256).hexdigest()
json.dump(forged, open('forged.json', 'w'))
"""


@pytest.fixture
def leaky_sandbox(sandbox, monkeypatch):
    """The sandbox with a hole after the runner: the candidate's forged.json becomes result.json.

    How a SIGINT that ended the runner early once delivered a forgery; the host must still refuse it.
    """
    launch = sandbox._launch_runner

    def launch_then_forge(job_dir: Path, *args, **kwargs):
        script = launch(job_dir, *args, **kwargs)
        if (job_dir / "forged.json").exists():
            (job_dir / "forged.json").replace(job_dir / "result.json")
        return script

    monkeypatch.setattr(sandbox, "_launch_runner", launch_then_forge)
    return sandbox


@pytest.mark.parametrize("source", sorted(LEAKS))
def test_what_the_oef_reads_cannot_seal_a_forged_result(
    leaky_sandbox, policy_dir: Path, source: str
) -> None:
    code = FORGE_FROM.replace("LEAK", LEAKS[source]) + HONEST_OEF
    result = leaky_sandbox.run_job(
        job("evaluate", code, policy_dir=own(leaky_sandbox, policy_dir), eval_episodes=64, static_check=False)
    )
    assert result.status == "crashed" and result.fitness is None, result
    assert result.error["type"] == "ForgedResult"


@pytest.mark.slow
def test_train_and_evaluate_end_to_end_then_cached(sandbox, tmp_path) -> None:
    from lero.sandbox import get_sandbox

    cached_sandbox = get_sandbox(sandbox.kind, cache_dir=tmp_path)
    try:
        fields = {
            "limits": Limits(wall_s=600, mem_mb=2048),
            "eval_episodes": 64,
            "candidate_id": "0-0",
        }
        first = train_and_evaluate(cached_sandbox, VALID, ENV, "mappo", 25_600, 0, **fields)
        assert first.status == "ok", first.error
        assert first.fitness == first.metrics["return"] and not first.cached
        assert {"steps", "return", "nearest", "team"} <= set(first.curves)
        assert set(first.reflection_stats["nearest"]) >= {"snapshots", "max", "mean", "min"}
        assert (Path(first.policy_dir) / "policy.pt").is_file()
        second = train_and_evaluate(cached_sandbox, VALID, ENV, "mappo", 25_600, 0, **fields)
        assert second.cached and second.fitness == first.fitness
    finally:
        cached_sandbox.close()


def test_warm_container_deadline_starts_with_the_job(docker_sandbox) -> None:
    limits = Limits(wall_s=60, mem_mb=1024, cpus=1, pids=64, output_bytes=8192, disk_mb=64)
    assert docker_sandbox.run_job(job("validate", VALID, limits=limits)).status == "ok"
    waited = time.monotonic() + 120  # the replenisher starts a spare after the job (no timing bound)
    while not docker_sandbox.idle_spares() and time.monotonic() < waited:
        time.sleep(0.2)
    spares = docker_sandbox.idle_spares()
    assert spares
    for warm in docker_sandbox._spares[limits]:  # an injected clock: each spare older than the deadline
        warm.clock -= limits.wall_s + 1
    assert spares.keys() <= docker_sandbox.idle_spares().keys()
    assert docker_sandbox.run_job(job("validate", VALID, limits=limits)).status == "ok"


def test_a_train_job_trains_without_evaluating_and_times_itself(process_sandbox) -> None:
    """Only the trusted evaluate job measures a policy; the train job reports its own clock."""
    result = process_sandbox.run_job(
        job("train", HONEST_OEF, steps=800, hparams={"n_envs": 16, "rollout_len": 25, "epochs": 1})
    )
    assert result.status == "ok", result.error
    assert set(result.metrics) == {"steps", "steps_per_s", "train_s"}  # no task metrics
    assert 0 < result.metrics["train_s"] <= result.run_s < result.elapsed_s
    timing = result.timing()
    assert timing["wait_s"] + timing["start_s"] + timing["run_s"] == pytest.approx(result.elapsed_s)


def test_prewarm_readies_a_warm_container_per_slot_and_the_first_job_takes_one(
    sandbox_image, tmp_path
) -> None:
    from lero.sandbox import get_sandbox

    sandbox = get_sandbox("docker", work_dir=tmp_path, max_parallel=2)  # spares = max_parallel
    try:
        assert sandbox.spares_per_limits == 2 and not sandbox.idle_spares()
        sandbox.prewarm(LIMITS)
        # at once: the job waits for the container being started instead of starting its own
        assert sandbox.run_job(job("validate", VALID)).status == "ok"
        waited = time.monotonic() + 180  # containers start in the background (no timing bound)
        while len(sandbox.idle_spares()) < 2 and time.monotonic() < waited:
            time.sleep(0.2)
        warm = sandbox.idle_spares()
        assert len(warm) == 2
        assert sandbox.run_job(job("validate", VALID)).status == "ok"
        assert len(warm.keys() - sandbox.idle_spares().keys()) == 1  # the job ran in a warm one
    finally:
        sandbox.close()
    assert not sandbox.idle_spares()
