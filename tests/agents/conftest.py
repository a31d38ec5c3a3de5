from collections.abc import Iterator

import pytest
import torch

from lero.agents import LLMConfig, Problem
from lero.agents.llm import ChatModel
from lero.training.envs.registry import task_spec
from tests.support.openai_server import OpenAIServer

torch.set_num_threads(1)

# simple_spread, N=3, num_agent_neighbors=1, num_landmark_neighbors=2 (LERO's default)
OBS_LAYOUT = {
    "self_vel": (0, 2),
    "self_pos": (2, 4),
    "landmark_rel": (4, 8),
    "other_rel": (8, 10),
    "comm": (10, 12),
}


@pytest.fixture
def openai_server() -> Iterator[OpenAIServer]:
    with OpenAIServer() as server:
        yield server


SPREAD = Problem(
    task_spec=task_spec("simple_spread"),
    env_name="simple_spread",
    env_description="Environment: simple_spread, N=3 agents, L=3 landmarks, partial observability.",
    task="Cover every landmark with an agent while avoiding collisions.",
    algo="mappo",
    n_agents=3,
    obs_dim=12,
    obs_layout=OBS_LAYOUT,
)


@pytest.fixture
def task() -> Problem:
    return SPREAD


def llm_config(server: OpenAIServer, **overrides: object) -> LLMConfig:
    """A config pointed at the test server, with short timeouts and backoff; free-form code
    design unless a test asks for another (`design=`)."""
    settings = {"timeout_s": 1.0, "max_retries": 2, "retry_base_s": 0.01, "retry_max_s": 2.0, "design": "code"}
    settings.update(overrides)
    return LLMConfig(
        backend="openai",
        model="test-model",
        base_url=server.base_url,
        api_key="test-key",
        **settings,
    )


def texts(model: ChatModel, role: str, messages: list, n: int = 1) -> list[str]:
    """The reply texts of one `replies` call."""
    return [reply.text for reply in model.replies(role, messages, n)]
