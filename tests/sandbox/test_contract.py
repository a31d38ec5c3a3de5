"""The static candidate check: valid modules pass, every adversarial trick is named."""

import pytest

from lero.training.contract import CONTRACT_TEXT, MAX_SOURCE_CHARS, static_check

VALID = '''"""A valid candidate."""
import math

import numpy as np
import torch
from torch import nn

SCALE = 0.5
WEIGHTS = {"dist": 1.0, "coll": -math.pi}


def hybrid_reward(ctx):
    dist = torch.cdist(ctx.state["agent_pos"], ctx.state["landmark_pos"])  # [B, N, L]
    nearest = dist.min(dim=-1).values  # [B, N]
    team = ctx.env_reward
    reward = (1 - ctx.progress) * team - SCALE * nearest
    return reward, {"nearest": nearest, "team": team.mean(dim=-1)}


@torch.no_grad()
def enhance_observation(obs):
    speed = obs[:, 0:2].norm(dim=-1, keepdim=True)  # [M, 1]
    out = torch.cat([obs, speed, nn.functional.relu(obs[:, 2:3])], dim=-1)
    out[:, -1] = out[:, -1] * float(np.float32(1.0))
    return out
'''


def rules(source: str) -> set[str]:
    return {v.rule for v in static_check(source)}


def test_valid_candidate_passes() -> None:
    assert static_check(VALID) == []


def test_contract_text_states_the_interface() -> None:
    for needle in ("hybrid_reward", "enhance_observation", "[M, D + k]", "ctx.state"):
        assert needle in CONTRACT_TEXT


@pytest.mark.parametrize(
    ("line", "rule"),
    [
        ("import os", "import"),
        ("import subprocess as sp", "import"),
        ("from os import system", "import"),
        ("from . import x", "import"),
        ("from torch import *", "import"),
        ("import torch.utils.cpp_extension", "denied-attribute"),
        ("from numpy import load", "denied-attribute"),
        ("from torch import _C", "private-attribute"),
        ("X = __import__('os')", "forbidden-name"),
        ("X = open", "forbidden-name"),
        ("X = torch.os", "denied-attribute"),
        ("X = np.lib", "denied-attribute"),
        ("X = torch._C", "private-attribute"),
        ("X = torch.__builtins__", "dunder"),
        ("X = __builtins__", "dunder"),
        ("X = '__class__'", "dunder"),
        ("print('hi')", "top-level"),
        ("X = torch.zeros(3)", "top-level"),
        ("class A: pass", "top-level"),
        ("for i in range(3): pass", "top-level"),
        ("if True: X = 1", "top-level"),
        ("async def f(x): pass", "top-level"),
    ],
)
def test_module_level_tricks_are_flagged(line: str, rule: str) -> None:
    source = "import numpy as np\nimport torch\n" + line + "\n" + VALID.split('"""', 2)[2]
    found = static_check(source)
    assert rule in {v.rule for v in found}, found
    assert any(v.line == 3 for v in found if v.rule == rule)


@pytest.mark.parametrize(
    ("body", "rule"),
    [
        ("eval('1')", "forbidden-name"),
        ("exec('x=1')", "forbidden-name"),
        ("compile('1', 'f', 'eval')", "forbidden-name"),
        ("getattr(obs, '__class__')", "forbidden-name"),
        ("setattr(torch, 'cat', None)", "forbidden-name"),
        ("globals()['torch']", "forbidden-name"),
        ("vars(torch)", "forbidden-name"),
        ("type(obs)", "forbidden-name"),
        ("breakpoint()", "forbidden-name"),
        ("memoryview(b'')", "forbidden-name"),
        ("obs.__class__.__subclasses__()", "dunder"),
        ("torch.os.system('id')", "denied-attribute"),
        ("torch.save(obs, 'x.pt')", "denied-attribute"),
        ("np.load('secrets.npy')", "denied-attribute"),
        ("obs.numpy().tofile('x')", "denied-attribute"),
        ("np.ones(200_000_000, np.uint8).dump('junk.bin')", "denied-attribute"),  # a 200 MB file left in the job directory
        ("obs.numpy().dumps()", "denied-attribute"),
        ("torch.profiler.profile()", "denied-attribute"),
        ("torch.onnx.export(obs, obs, 'm.onnx')", "denied-attribute"),
        ("obs.share_memory_()", "denied-attribute"),
        ("torch.ops.load_library('evil.so')", "denied-attribute"),
        ("torch.utils.cpp_extension.load_inline('x', '')", "denied-attribute"),
        ("torch.jit.script(obs)", "denied-attribute"),
        ("torch.compile(obs)", "denied-attribute"),
        ("torch.cat = None", "attribute-store"),
        ("del torch.cat", "attribute-store"),
        ("obs.data = obs", "attribute-store"),
        ("'{0.__class__}'.format(obs)", "dunder"),
    ],
)
def test_function_body_tricks_are_flagged(body: str, rule: str) -> None:
    source = VALID.replace("    return out\n", f"    {body}\n    return out\n")
    assert rule in rules(source)


def test_required_functions_and_signatures() -> None:
    assert "missing-function" in rules("import torch\ndef hybrid_reward(ctx):\n    return 1\n")
    two_args = VALID.replace("def enhance_observation(obs):", "def enhance_observation(obs, k):")
    assert "signature" in rules(two_args)
    star = VALID.replace("def hybrid_reward(ctx):", "def hybrid_reward(*ctx):")
    assert "signature" in rules(star)
    nested_only = "import torch\ndef f(x):\n    def hybrid_reward(ctx):\n        return 1\n"
    assert "missing-function" in rules(nested_only)


def test_syntax_error_and_size_cap() -> None:
    (violation,) = static_check("def hybrid_reward(ctx:\n")
    assert violation.rule == "syntax" and violation.line == 1
    assert rules("x = 1\n" * (MAX_SOURCE_CHARS // 6 + 1)) == {"size"}
    assert rules("(" * 20_000) == {"syntax"}
    assert rules(b"import os") == {"syntax"}  # type: ignore[arg-type]
