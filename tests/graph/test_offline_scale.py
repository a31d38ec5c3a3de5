"""The offline designer at larger teams: its optimal-assignment candidates validate in the sandbox.

The Hungarian method in the rendered module is polynomial (O(N^2 L) batched steps), so
a candidate crediting each agent with its optimally assigned landmark stays within the
validation's time budget (a multiple of the env's own step) at N=6 and N=8.
"""

from __future__ import annotations

import pytest

from lero.agents.offline.designer import OfflineDesigner
from lero.agents.offline.genome import genome_of
from lero.graph.configuration import RunSpec
from lero.graph.context import problem
from lero.graph.trust import job_env
from lero.sandbox import Job, get_sandbox
from tests.graph.test_graph_e2e import _docker_or_skip


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["process", pytest.param("docker", marks=pytest.mark.docker)])
@pytest.mark.parametrize("n_agents", [6, 8])
def test_optimal_assignment_candidates_validate_in_the_sandbox(tmp_path, n_agents, backend):
    spec = RunSpec(env_kwargs={**RunSpec.default_env_kwargs(), "N": n_agents})
    drafts = OfflineDesigner(seed=0).design(problem(spec), 4, [], "")
    optimal = [d for d in drafts if genome_of(d.code).assignment == "optimal" and genome_of(d.code).needs_assignment()]
    assert optimal and "def optimal_assignment" in optimal[0].code  # the prior credits by optimal assignment
    if backend == "docker":
        _docker_or_skip()
    sandbox = get_sandbox(backend, work_dir=tmp_path)
    try:
        results = [sandbox.run_job(Job(kind="validate", code=d.code, env=job_env(spec), seed=0)) for d in drafts]
    finally:
        sandbox.close()
    assert [r.status for r in results] == ["ok"] * len(drafts), [r.error for r in results]
