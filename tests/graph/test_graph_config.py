"""RunSpec: the LERO defaults, and one clear line for every bad setting."""

from pathlib import Path

import pytest

from lero.graph.configuration import RunError, RunSpec
from lero.graph.trust import confirm_env, job_env
from lero.training.envs import task_spec


def test_defaults_are_the_lero_setting():
    spec = RunSpec()
    assert spec.env == "simple_spread" and spec.task is None
    assert spec.env_kwargs == {"N": 3, "num_agent_neighbors": 1, "num_landmark_neighbors": 2}
    assert RunSpec.default_env_kwargs() == task_spec("simple_spread").lero_kwargs
    assert spec.algo == "mappo" and spec.approvals == set()


def test_env_defaults_and_the_sandbox_env_come_from_the_env():
    spec = RunSpec(env="simple_reference")
    assert spec.env_kwargs == task_spec("simple_reference").lero_kwargs
    assert job_env(spec) == {"name": "simple_reference", **spec.env_kwargs}
    custom = RunSpec(env="tests.graph.test_custom_env_loop:make_rendezvous", env_kwargs={"n_agents": 2})
    confirmed = confirm_env(custom.env, custom.env)
    assert job_env(custom, confirmed)["n_agents"] == 2
    assert job_env(custom, confirmed)["import_root"] == str(Path(__file__).resolve().parents[2])
    with pytest.raises(RunError, match="pass --env tests"):
        job_env(custom)  # nobody confirmed it: nothing imported


def test_explicit_empty_env_kwargs_mean_the_envs_own_defaults():
    assert RunSpec(env_kwargs={}).env_kwargs == {}


@pytest.mark.parametrize(
    ("values", "needle"),
    [
        ({"generations": 0}, "generations"),
        ({"population": 0}, "population"),
        ({"steps": 0}, "steps"),
        ({"seeds": 0}, "seeds"),
        ({"max_llm_requests": 0}, "max_llm_requests"),
        ({"wall_clock_s": 0}, "wall_clock_s"),
        ({"llm": "claude"}, "unknown llm"),
        ({"approve": "sometimes"}, "approve"),
        ({"sandbox": "vm"}, "sandbox"),
        ({"run_id": "../escape"}, "run id"),
        ({"colour": "blue"}, "colour"),
    ],
)
def test_bad_values_raise_one_line(values, needle):
    with pytest.raises(RunError) as caught:
        RunSpec.parse(values)
    message = str(caught.value)
    assert needle in message and "\n" not in message


def test_all_expands_to_every_approval_step():
    assert RunSpec(approve="all").approvals == {"spec", "candidates", "generations"}
    assert RunSpec(approve="generations").approvals == {"generations"}


def test_configurable_keeps_only_runspec_fields_and_names_the_run_by_thread():
    spec = RunSpec.from_configurable({"thread_id": "t1", "run_id": "server-run-9", "assistant_id": "a",
                                      "population": 2, "steps": 500})
    assert (spec.population, spec.steps, spec.run_id) == (2, 500, "t1")


def test_generated_run_ids_are_valid_and_distinct():
    first, second = RunSpec().with_run_id(), RunSpec().with_run_id()
    assert first.run_id != second.run_id
    assert RunSpec.parse({"run_id": first.run_id}).run_id == first.run_id
    assert RunSpec(run_id="mine").with_run_id().run_id == "mine"


def test_jobs_at_once_fill_the_cores_unless_the_user_says() -> None:
    from lero.graph.configuration import parallel_jobs

    assert parallel_jobs(None, 1.0, cores=16) == 16  # one single-threaded job per core
    assert parallel_jobs(None, 2.0, cores=16) == 8  # jobs x threads per job = cores
    assert parallel_jobs(None, 4.0, cores=2) == 1  # never none
    assert parallel_jobs(3, 1.0, cores=16) == 3  # --max-parallel wins


def test_a_run_sandbox_gets_one_slot_per_core_by_default(tmp_path: Path) -> None:
    from lero.graph.configuration import machine_cores
    from lero.graph.context import open_sandbox

    default = open_sandbox(RunSpec(sandbox="process", runs_dir=str(tmp_path)), tmp_path / "a")
    chosen = open_sandbox(RunSpec(sandbox="process", runs_dir=str(tmp_path), max_parallel=3), tmp_path / "b")
    try:
        assert default.max_parallel == machine_cores() and chosen.max_parallel == 3
    finally:
        default.close()
        chosen.close()


def test_max_parallel_flag_reaches_the_run_spec() -> None:
    from lero.app.cli.args import UsageError, build_parser, spec_fields

    fields = spec_fields(build_parser().parse_args(["run", "--max-parallel", "5"]))
    assert RunSpec(**fields).max_parallel == 5
    assert RunSpec(**spec_fields(build_parser().parse_args(["run"]))).max_parallel is None
    with pytest.raises(UsageError, match="max-parallel"):
        build_parser().parse_args(["run", "--max-parallel", "0"])
