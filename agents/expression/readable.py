"""What an expression may read, and with which dims: derived once from the task.

Every value is per agent: a tensor whose leading dims are the agents' ([B, N] in the reward
and the potential, [M] rows in the observation feature) followed by its named dims `dims`.
A state field is seen whole by every agent (`landmark_pos`: ("L", "xy")); `own(f)` is
agent i's own entity of a field whose entity dim follows the agents (`own(agent_pos)`:
("xy",)). A name that reads world state carries `world=True`, which an observation feature
may not read (CTDE: the OEF runs on the agent's own observation alone).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from lero.agents.records import Problem

Dims = tuple[str, ...]
SCOPES = ("reward", "potential", "feature")  # a term of the HRF, the potential, an OEF feature
COMPONENT_NAMES = {2: "xy", 3: "xyz"}
MAX_ENUMERATED_COLUMNS = 64  # obs[i] columns listed one by one in the grammar up to this width


@dataclass(frozen=True)
class Input:
    """One name an expression may read: its dims, how it renders in each scope, what it is."""

    name: str  # as written in an expression: `agent_pos`, `own(agent_pos)`, `obs[3]`, `progress`
    dims: Dims
    scopes: tuple[str, ...]  # where it may be read
    code: dict[str, str]  # scope -> torch source of the value, leading dims first
    doc: str


def dim_names(shape: str, n_agents: int) -> tuple[Dims, bool] | None:
    """A TaskSpec shape ("[B, N, 2]") as named dims after B, and whether its entity dim follows
    the agents (None: no batch dim first). Letters keep their name; a number is `xy`/`xyz`/`c<k>`
    as the last dim (components), `E<k>` before it (entities)."""
    symbols = [s.strip() for s in shape.strip().strip("[]").split(",")]
    if not symbols or symbols[0] != "B":
        return None
    rest = symbols[1:]
    names = []
    for index, symbol in enumerate(rest):
        if not re.fullmatch(r"[A-Za-z]\w*|\d+", symbol):
            return None
        if symbol.isdigit():
            size = int(symbol)
            symbol = COMPONENT_NAMES.get(size, f"c{size}") if index == len(rest) - 1 else f"E{size}"
        names.append(symbol)
    if len(set(names)) != len(names):
        return None
    follows = bool(rest) and len(rest) >= 2 and (rest[0] == "N" or rest[0] == str(n_agents))
    return tuple(names), follows


def _state_code(name: str, scope: str, whole: bool) -> str:
    base = 'ctx.state' if scope == "reward" else "state"
    return f'{base}["{name}"]' + (".unsqueeze(1)" if whole else "")


def task_inputs(task: Problem) -> dict[str, Input]:
    """Every name the task's expressions may read, by the name written."""
    inputs: dict[str, Input] = {}
    world = ("reward", "potential")
    paired = {p.field for p in task.task_spec.pairings}
    for field in task.task_spec.state_fields:
        named = dim_names(field.shape, task.n_agents)
        if named is None:
            continue
        dims, follows = named
        whole = {s: _state_code(field.name, s, True) for s in world}
        inputs[field.name] = Input(field.name, dims, world, whole, f"{field.shape} {field.doc} (every agent sees it whole)")
        if follows or (field.name in paired and len(dims) >= 1):
            own = {s: _state_code(field.name, s, False) for s in world}
            inputs[f"own({field.name})"] = Input(f"own({field.name})", dims[1:], world, own,
                                                 f"agent i's own entry of {field.name}")
    obs_code = {"reward": "ctx.obs", "potential": "obs", "feature": "obs"}
    inputs["obs"] = Input("obs", ("D",), SCOPES, obs_code, f"the agent's own observation, {task.obs_dim} columns (D)")
    for slot, (start, end) in task.obs_layout.items():
        width = end - start
        dims = () if width == 1 else (COMPONENT_NAMES.get(width, f"c{width}"),)
        code = {s: f"{c}[..., {start}:{end}]" + (".squeeze(-1)" if width == 1 else "") for s, c in obs_code.items()}
        inputs[f"obs_{slot}"] = Input(f"obs_{slot}", dims, SCOPES, code, f"observation columns {start}:{end} ({slot})")
    inputs["env_reward"] = Input("env_reward", (), ("reward",), {"reward": "ctx.env_reward"},
                                 "the environment's own reward of the agent")
    inputs["step"] = Input("step", (), ("reward",), {"reward": "ctx.step.float()[:, None]"}, "the step within the episode")
    inputs["progress"] = Input("progress", (), ("reward",), {"reward": "float(ctx.progress)"},
                               "the fraction of the training budget used, 0 to 1")
    return inputs


def obs_column(scope: str, index: int) -> str:
    """The source of `obs[index]` in `scope`."""
    return f"{'ctx.obs' if scope == 'reward' else 'obs'}[..., {index}]"


def scope_types(inputs: dict[str, Input], scope: str) -> list[Dims]:
    """The dims a value of `scope` may have: its inputs' and all they reduce to (one dim off at
    a time), scalars first; a finite set, so the grammar can name a rule for each."""
    found: list[Dims] = [()]
    todo = [i.dims for i in inputs.values() if scope in i.scopes]
    while todo:
        dims = todo.pop()
        if dims in found:
            continue
        found.append(dims)
        todo += [dims[:k] + dims[k + 1:] for k in range(len(dims))]
    return sorted(found, key=lambda d: (len(d), d))
