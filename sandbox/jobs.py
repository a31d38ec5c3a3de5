"""lero's job handlers, run by the runner inside the sandbox: one function per kind.

Each kind is declared in `sandbox.jobkinds` (a `JobKind` naming its handler here); a
handler gets a validated `Job` (`sandbox.types`, parsed from job.json by the runner) and
what the harness gives it (`Inside`: the job directory, and the host's key, taken when
the handler is ready for it) and returns the result document; `run_job` maps every
failure to a status. The harness around them (PID 1, the seal, the signals, the warm
wait) is `sandbox.harness`.

A handler that runs candidate code in this process gives a result that reflects it; the
trusted measurement keeps all candidate code in a forked worker (`OEFWorker`,
`sandbox.oef_worker`), so its kind may be declared sealed (`sandbox.jobkinds`).
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import signal
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lero.sandbox.oef_worker import (
    HEADER,
    LENGTH,
    MAX_OUTPUT_COLS,
    isolate_stdio,
    read_exact,
    serve,
)
from lero.sandbox.tracebacks import error_dict, raised_in_candidate, register_source
from lero.sandbox.types import Job
from lero.training.defaults import EVAL_SEED

if TYPE_CHECKING:
    from lero.training.rollout_evidence import EvidenceRecorder

POLICY_SUBDIR = "policy"
CHECKPOINT_PREFIX = "step-"  # policy/step-<env steps>/: an interval checkpoint
GROUP_SEED_PREFIX = "seed-"  # policy/seed-<seed>/: one seed's files of a group train job
PROGRESS_FILE = "progress.json"  # train: {"done", "total", "return"}, polled by the host
PROGRESS_INTERVAL_S = 0.5
VALIDATE_ENVS = 1024  # the PPO batch: hooks are timed at the size training calls them with
VALIDATE_STEPS = 4
# Budget per hook call, as a multiple of the environment's own step measured in the same
# process on the same batch (so machine load cancels out): the fastest of VALIDATE_STEPS
# calls against the fastest step. Vectorised hooks cost about 1 step, the offline
# designer's Hungarian assignment 5-16 (N=6..16, measured under load); Python loops over
# the batch cost 60-120.
MAX_STEP_RATIO = 30.0
TOO_SLOW = "TooSlow"  # a timing verdict: retried once here, never cached (sandbox.cache)
# torch reports allocation failures under RLIMIT_AS as RuntimeError, not MemoryError
OOM_MESSAGES = ("can't allocate memory", "not enough memory", "std::bad_alloc")


@dataclass(frozen=True)
class Inside:
    """What a handler gets from the harness besides its job."""

    job_dir: Path  # the job directory (read-write, shared with the candidate)
    take_key: Callable[[], bytes]  # the host's key: call it only once no candidate code can see it


Handler = Callable[[Job, Inside], dict[str, Any]]  # a kind's handler: the job -> its result document


class CandidateError(Exception):
    """Candidate code failed in the OEF worker; carries the worker's trimmed error."""

    def __init__(self, error: dict) -> None:
        super().__init__(error.get("message", ""))
        self.error = error


class OEFWorker:
    """Callable OEF proxy: ships obs [M, D] to a forked worker process, returns [M, D + k].

    Forking and loading are two steps, so the runner can take its key between them.
    """

    def __init__(self) -> None:
        to_worker, requests = os.pipe()
        replies, from_worker = os.pipe()
        self.pid = os.fork()
        if self.pid == 0:  # the worker: never returns
            try:
                isolate_stdio(keep={to_worker, from_worker})
                serve(os.fdopen(to_worker, "rb"), os.fdopen(from_worker, "wb"))
            finally:
                os._exit(0)
        os.close(to_worker)
        os.close(from_worker)
        self.requests = os.fdopen(requests, "wb")
        self.replies = os.fdopen(replies, "rb")

    def load(self, source: str) -> None:
        """Send the candidate source; the worker execs it (the first candidate code to run)."""
        payload = source.encode()
        self.send(LENGTH.pack(len(payload)) + payload)
        self.receive_status()

    def send(self, data: bytes) -> None:
        try:
            self.requests.write(data)
            self.requests.flush()
        except (BrokenPipeError, OSError):
            self.died()

    def died(self) -> None:
        raise CandidateError(
            {
                "type": "WorkerDied",
                "message": "the process running enhance_observation exited",
                "traceback": "",
            }
        )

    def receive_status(self) -> None:
        try:
            status = read_exact(self.replies, 1)
            if status == b"E":
                (length,) = LENGTH.unpack(read_exact(self.replies, LENGTH.size))
                raise CandidateError(json.loads(read_exact(self.replies, length)))
        except EOFError:
            self.died()

    def __call__(self, obs):  # obs [M, D] float32 -> [M, D + k]
        import torch

        rows = obs.detach().to(torch.float32).contiguous()
        self.send(HEADER.pack(*rows.shape) + rows.numpy().tobytes())
        self.receive_status()
        try:
            n_rows, n_cols = HEADER.unpack(read_exact(self.replies, HEADER.size))
            if n_rows != rows.shape[0] or not 0 < n_cols <= MAX_OUTPUT_COLS:
                raise CandidateError(
                    {
                        "type": "BadReply",
                        "message": f"OEF worker replied [{n_rows}, {n_cols}]",
                        "traceback": "",
                    }
                )
            data = read_exact(self.replies, n_rows * n_cols * 4)
        except EOFError:
            self.died()
        return torch.frombuffer(bytearray(data), dtype=torch.float32).reshape(n_rows, n_cols)

    def close(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, signal.SIGKILL)
        os.waitpid(self.pid, 0)


def env_kwargs(env: dict[str, Any], cpus: float) -> dict[str, Any]:
    """A job's env spec ENV without its "name": the keyword arguments of `make_env`.

    A PettingZoo env's adapter forks worker processes; unless the env names their number,
    it gets one per CPU of the job's quota (at least one, at most the adapter's own cap),
    not one per CPU of the machine: inside a container the machine's count says nothing
    about the job, and every worker counts against its pids and memory limits.
    """
    from lero.training.envs.registry import is_native

    kwargs = {k: v for k, v in env.items() if k != "name"}
    if is_native(env["name"]) or "workers" in kwargs:
        return kwargs
    from lero.training.envs.worker_pool import MAX_WORKERS

    return {**kwargs, "workers": max(1, min(MAX_WORKERS, math.floor(cpus)))}


def job_env_kwargs(job: Job) -> dict[str, Any]:
    """`env_kwargs` of JOB's env under JOB's CPU quota."""
    return env_kwargs(job.env, job.limits.cpus)


def describe(job: Job, inside: Inside) -> dict[str, Any]:
    """The env's facts the host needs before a run (its task, spaces, state fields)."""
    from lero.training.envs.registry import describe_env

    return {"status": "ok", "info": describe_env(job.env["name"], **job_env_kwargs(job))}


def validate(job: Job, inside: Inside) -> dict[str, Any]:
    """The hooks on real env batches (the potential too, when defined): shapes, dtype,
    finiteness, OEF prefix, time per call."""
    from lero.training import load_candidate, make_env
    from lero.training.hooks import ObservationEnhancer, PotentialCheck, RewardShaper
    from lero.training.rollout_evidence import EvidenceRecorder, penalty_signals

    hooks = load_candidate(job.code)
    missing = [
        name for name in ("hybrid_reward", "enhance_observation") if getattr(hooks, name) is None
    ]
    if missing:
        return failure(
            "invalid_output", "MissingFunction", f"the candidate defines no {', '.join(missing)}"
        )
    env = make_env(job.env["name"], VALIDATE_ENVS, **job_env_kwargs(job))
    enhancer = ObservationEnhancer(hooks.enhance_observation, env.obs_dim)
    shaper = RewardShaper(hooks.hybrid_reward, env.task.metric_names)
    potential = None if hooks.potential is None else PotentialCheck(hooks.potential)
    recorder = EvidenceRecorder(env.obs_dim, penalty_signals(env.task))
    seconds, enhanced, components = time_hooks(env, enhancer, shaper, job.seed, potential, recorder)
    if slowest_ratio(seconds)[1] > MAX_STEP_RATIO:  # machine noise: measure once more
        again, enhanced, components = time_hooks(env, enhancer, shaper, job.seed, potential)
        seconds = {name: min(first, again[name]) for name, first in seconds.items()}
    hook, ratio = slowest_ratio(seconds)
    if ratio > MAX_STEP_RATIO:
        return failure(
            "invalid_output",
            TOO_SLOW,
            f"{hook} takes {seconds[hook]:.4f} s per call, {ratio:.1f}x the environment's own step "
            f"({seconds['env_step']:.4f} s) on {env.n_envs} envs x {env.n_agents} agents "
            f"(budget {MAX_STEP_RATIO:g}x): vectorise it, no Python loops over the batch",
        )
    return {
        "status": "ok",
        "metrics": {
            "obs_dim": float(env.obs_dim),
            "enhanced_obs_dim": float(enhanced.shape[-1]),
            **{f"{name}_s": value for name, value in seconds.items()},
            **{f"{name}_step_ratio": value / seconds["env_step"] for name, value in seconds.items() if name != "env_step"},
        },
        "curves": {},
        "reflection_stats": {},
        "components": sorted(components),
        "evidence": recorder.to_json(),
    }


def time_hooks(env: Any, enhancer: Any, shaper: Any, seed: int, potential: Any = None,
               recorder: EvidenceRecorder | None = None) -> tuple[dict[str, float], Any, dict]:
    """Fastest of VALIDATE_STEPS calls of each hook (POTENTIAL: on the state each step
    reached, when the candidate defines one) and of the env's own step, in seconds; RECORDER,
    when given, gets every step's tensors outside the timed calls (and, on the first step,
    the OEF again and on the first half of the envs alone, for its leak check)."""
    import torch

    generator = torch.Generator().manual_seed(seed)
    obs = env.reset(seed=seed)  # [B, N, D]
    step = torch.zeros(env.n_envs, dtype=torch.long)  # [B]
    seconds: dict[str, list[float]] = {"enhance_observation": [], "hybrid_reward": [], "env_step": [],
                                       **({"potential": []} if potential is not None else {})}
    for index in range(VALIDATE_STEPS):
        started = time.perf_counter()
        enhanced = enhancer(obs)  # [B, N, D + k]
        seconds["enhance_observation"].append(time.perf_counter() - started)
        actions = env.random_actions(generator)  # [B, N], valid for every agent
        started = time.perf_counter()
        next_obs, reward, done, info = env.step(actions)
        seconds["env_step"].append(time.perf_counter() - started)
        started = time.perf_counter()
        hybrid, components = shaper(obs, next_obs, actions, reward, env.world(), step, index / VALIDATE_STEPS)
        seconds["hybrid_reward"].append(time.perf_counter() - started)
        if recorder is not None:
            recorder.add_step(reward, hybrid, components, info)
            recorder.add_features(enhanced)
            if index == 0:
                recorder.add_leak_check(enhanced, enhancer(obs), enhancer(obs[: max(1, env.n_envs // 2)]))
        if potential is not None:
            started = time.perf_counter()
            potential(env.world(), next_obs)  # Phi [B, N] of the state the slots are in now
            seconds["potential"].append(time.perf_counter() - started)
        step = torch.where(done, 0, step + 1)
        obs = next_obs
    return {name: min(times) for name, times in seconds.items()}, enhanced, components


def slowest_ratio(seconds: dict[str, float]) -> tuple[str, float]:
    """The hook with the largest cost in env steps, and that cost."""
    step = max(seconds["env_step"], 1e-9)
    hook = max((name for name in seconds if name != "env_step"), key=seconds.__getitem__)
    return hook, seconds[hook] / step


class ProgressFile:
    """`progress` callback for `training.train`: keeps JOB_DIR/progress.json current.

    The runner has no channel to the host while it runs, so the host polls this file to
    move its progress bars. Written at most every PROGRESS_INTERVAL_S (the final count
    always) and atomically, so the host never reads half a file; a failed write (the
    candidate shares the directory and may have put something in the way) is ignored:
    progress is cosmetic and must never fail the training.
    """

    def __init__(self, job_dir: Path) -> None:
        self.job_dir = job_dir
        self.last_write = -math.inf

    def __call__(self, done: int, total: int, info: dict) -> None:
        now = time.monotonic()
        if done < total and now - self.last_write < PROGRESS_INTERVAL_S:
            return
        self.last_write = now
        latest = info.get("return")
        finite = isinstance(latest, int | float) and math.isfinite(latest)
        payload = {
            "done": int(done),
            "total": int(total),
            "return": float(latest) if finite else None,
        }
        temp_path = None
        try:
            fd, temp_path = tempfile.mkstemp(dir=self.job_dir, prefix=".progress-")
            with os.fdopen(fd, "w") as handle:
                json.dump(payload, handle)
            os.replace(temp_path, self.job_dir / PROGRESS_FILE)
        except OSError:
            if temp_path is not None:
                with contextlib.suppress(OSError):
                    os.unlink(temp_path)


def train(job: Job, inside: Inside) -> dict[str, Any]:
    """Train with the candidate's hooks; weights and the learner state (what a next rung
    continues) go to JOB_DIR/policy, interval checkpoints (when the job asks for them) to
    JOB_DIR/policy/step-<env steps>.

    A job with a `group` trains those seeds of the plan together (`training.train_seeds`,
    each seed bitwise what it gives alone) and leaves each seed's files in
    JOB_DIR/policy/seed-<seed>; its result lists one entry per seed.

    No evaluation here: the fitness comes from the separate evaluate job, which runs no
    candidate code but the OEF, so an evaluation next to the candidate would be wasted.
    """
    from lero.training import (
        Hooks,
        TrainConfig,
        load_candidate,
        save_learner,
        save_policy,
        train_seeds,
    )

    job_dir = inside.job_dir
    cfgs = [
        TrainConfig(env=job.env["name"], env_kwargs=job_env_kwargs(job), algo=job.algo, steps=job.steps,
                    seed=member.seed, n_envs=job.n_envs, eval_episodes=job.eval_episodes, hparams=job.hparams,
                    threads=max(1, int(job.limits.cpus)), checkpoint_every=job.checkpoint_every,
                    stop_at=job.stop_at, resume=member.resume_dir)
        for member in job.members()
    ]  # fmt: skip
    folders = [group_policy_dir(job_dir, cfg.seed) if job.group else job_dir / POLICY_SUBDIR for cfg in cfgs]
    for folder in folders:
        folder.mkdir(parents=True, exist_ok=True)
    # a module per seed: a candidate's module-level state must not pass between seeds
    hooks = [Hooks() if job.code is None else load_candidate(job.code) for _ in cfgs]

    def checkpointer(folder: Path) -> Callable[[int, Any], None]:
        def checkpoint(step: int, policy: Any) -> None:
            (folder / f"{CHECKPOINT_PREFIX}{step}").mkdir()
            save_policy(policy, folder / f"{CHECKPOINT_PREFIX}{step}")

        return checkpoint

    results = train_seeds(cfgs, hooks, ProgressFile(job_dir), [checkpointer(f) for f in folders], evaluation=False)
    outputs = []
    for cfg, result, folder in zip(cfgs, results, folders, strict=True):
        save_policy(result.policy, folder)
        save_learner(cfg, result.start_steps + result.steps, result.learner, folder)
        summary = result.to_json()
        outputs.append({
            "status": "ok",
            "metrics": {"steps": float(summary["steps"]), "steps_per_s": summary["steps_per_s"],
                        "train_s": summary["train_s"]},
            "curves": summary["curves"],
            "reflection_stats": summary["reflection_stats"],
        })  # fmt: skip
    if not job.group:
        return outputs[0]
    return {"status": "ok", "group": [{"seed": cfg.seed, **out} for cfg, out in zip(cfgs, outputs, strict=True)]}


def group_policy_dir(job_dir: Path, seed: int) -> Path:
    """Where a group train job leaves SEED's weights, learner state and checkpoints."""
    return job_dir / POLICY_SUBDIR / f"{GROUP_SEED_PREFIX}{seed}"


def evaluate(job: Job, inside: Inside) -> dict[str, Any]:
    """Trusted measurement of the trained policy with only the candidate's OEF (in a worker):
    each metric's mean, and its value in every episode (`episodes`).

    Order: weights loaded, worker forked, key received, only then the candidate source sent.
    A job with a `group` measures those seeds' policies, each with its own worker (a fresh
    module, as alone) on its member's `eval_seed` episodes (the same episodes where the
    members share it); its result lists one entry per seed.
    """
    import torch

    from lero.training import EpisodeTrace, evaluate_episodes, load_policy

    torch.set_num_threads(max(1, int(job.limits.cpus)))
    members = job.members()
    policies = [load_policy(member.policy_dir) for member in members]
    workers = [None if job.code is None else OEFWorker() for _ in members]
    outputs = []
    try:
        inside.take_key()
        for member, policy, worker in zip(members, policies, workers, strict=True):
            if worker is not None:
                worker.load(job.code)
            trace = EpisodeTrace(min(job.record_episodes, job.eval_episodes)) if job.record_episodes else None
            episodes = evaluate_episodes(
                policy,
                job.env["name"],
                job_env_kwargs(job),
                enhance_observation=worker,
                episodes=job.eval_episodes,
                seed=EVAL_SEED if member.eval_seed is None else member.eval_seed,
                trace=trace,
            )
            metrics = {name: float(values.mean()) for name, values in episodes.items()}
            outputs.append({
                "status": "ok",
                "metrics": metrics,
                "episodes": {name: values.tolist() for name, values in episodes.items()},
                "fitness": metrics["return"],
                "curves": {},
                "reflection_stats": {},
                **({"trajectories": trace.to_json()} if trace is not None else {}),
            })  # fmt: skip
    finally:
        for worker in workers:
            if worker is not None:
                worker.close()
    if not job.group:
        return outputs[0]
    return {"status": "ok", "group": [{"seed": m.seed, **out} for m, out in zip(members, outputs, strict=True)]}


def failure(status: str, error_type: str, message: str, traceback: str = "") -> dict[str, Any]:
    return {
        "status": status,
        "error": {"type": error_type, "message": message, "traceback": traceback},
    }


def run_job(handler: Handler, job: Job, inside: Inside) -> dict[str, Any]:
    """Run HANDLER (the job's kind's) and map every failure to a JobResult status.

    BaseException too: SystemExit or KeyboardInterrupt from candidate code must still end
    in the runner's own result.
    """
    from lero.training import HookError

    if job.code is not None:
        register_source(job.code)
    try:
        return handler(job, inside)
    except CandidateError as error:
        return {"status": "code_error", "error": error.error}
    except MemoryError:
        return failure("oom", "MemoryError", "out of memory")
    except HookError as error:
        return {"status": "invalid_output", "error": error_dict(error)}
    except BaseException as error:
        if any(marker in str(error) for marker in OOM_MESSAGES):
            return failure("oom", type(error).__name__, str(error).splitlines()[0][:500])
        if raised_in_candidate(error):
            return {"status": "code_error", "error": error_dict(error)}
        return {"status": "crashed", "error": error_dict(error, candidate_only=False)}
