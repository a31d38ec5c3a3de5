"""Genome -> readable candidate module (torch), with the genome embedded for later generations.

Each reward term and each feature is one marked block (`# term: kind`, `# feature: name`)
so a traceback line number points back at the gene that failed (see `gene_at_line`).
Its twin is agents/expression/render.py: the same step for an expression design.
"""

from __future__ import annotations

import re

from lero.agents.offline.genome import (
    FEATURE_SLOTS,
    GENOME_TAG,
    POTENTIAL_OF,
    TEAM_TERMS,
    Genome,
    Term,
)
from lero.agents.records import Problem

SEEN_OCCUPIED_DIST = 0.15  # the OEF's looser "someone is on it" threshold, from offsets alone
FAR = 10.0  # stands in for the distance of an unobserved (zero-padded) slot

def raw_term(kind: str, notes: dict) -> str:
    """One reward term as code; thresholds are the task's own (its TaskSpec notes:
    `occupy_dist` a landmark counts as occupied, `collision_dist` two agents touch)."""
    occupy, collide = notes["occupy_dist"], notes["collision_dist"]
    if kind in POTENTIAL_OF:
        return raw_term(POTENTIAL_OF[kind], notes)
    return {
    "env": "ctx.env_reward",
    "team_coverage": "-dist.min(dim=1).values.sum(dim=-1)",
    "team_occupancy": f"(dist.min(dim=1).values < {occupy}).float().mean(dim=-1)",
    "nearest": "-dist.min(dim=-1).values",
    "assigned": "-target_dist",
    "on_target": f"(target_dist < {occupy}).float()",
    "collision": f"-(gaps < {collide}).float().sum(dim=-1)",
    "approach": "(agent_vel * heading).sum(dim=-1)",
    "settle": "-torch.linalg.norm(agent_vel, dim=-1) * torch.exp(-target_dist / 0.2)",
    "spread": "gaps.min(dim=-1).values.clamp(max=0.5)",
    }[kind]
TERM_MEANING = {
    "env": "the environment's own reward",
    "team_coverage": "team: minus the summed distance from each landmark to its closest agent",
    "team_occupancy": "team: fraction of landmarks with an agent on them",
    "nearest": "minus the distance to the agent's nearest landmark",
    "assigned": "minus the distance to the landmark assigned to the agent",
    "on_target": "1 when the agent sits on its assigned landmark",
    "collision": "minus the number of agents touching this one",
    "approach": "speed towards the assigned landmark",
    "settle": "minus the speed, weighted by closeness to the assigned landmark",
    "spread": "distance to the closest other agent, capped at 0.5",
}
TERM_MEANING.update({kind: f"potential Phi: {TERM_MEANING[base]} (lero adds gamma Phi(s') - Phi(s): "
                           "policy-invariant shaping)" for kind, base in POTENTIAL_OF.items()})
SCHEDULE_FACTOR = {"constant": "", "ramp_up": "progress * ", "ramp_down": "(1.0 - progress) * "}

GREEDY_HELPER = '''
def greedy_assignment(dist):
    """Landmark index per agent [B, N]: repeatedly pair the closest free agent and landmark."""
    B, N, L = dist.shape
    cost = dist.clone()
    assigned = dist.argmin(dim=-1)  # [B, N]; agents left over when N > L keep their nearest
    rows = torch.arange(B)
    blocked = torch.finfo(dist.dtype).max
    for _ in range(min(N, L)):
        pair = cost.reshape(B, N * L).argmin(dim=1)  # [B]
        agent, landmark = pair // L, pair % L
        assigned[rows, agent] = landmark
        cost[rows, agent, :] = blocked
        cost[rows, :, landmark] = blocked
    return assigned
'''

OPTIMAL_HELPER = '''
def enumerated_assignment(dist):
    """The least-cost one-to-one assignment [B, N] (N <= L), every one of them scored at once."""
    B, N, L = dist.shape
    tuples = torch.cartesian_prod(*[torch.arange(L)] * N).reshape(-1, N)  # [L^N, N]
    ordered = tuples.sort(dim=1).values
    one_to_one = tuples[(ordered[:, 1:] != ordered[:, :-1]).all(dim=1)]  # [P, N]
    cost = dist[:, torch.arange(N), one_to_one].sum(dim=-1)  # [B, P]
    return one_to_one[cost.argmin(dim=1)]


def optimal_assignment(dist):
    """Landmark index per agent [B, N] with the least summed distance.

    Few agents and landmarks (L^N <= 4096): all assignments scored in a few batched ops.
    Otherwise the Hungarian method, shortest augmenting paths with row/column potentials:
    O(N^2 L) steps, each vectorised over the batch; index 0 of rows and columns is a dummy.
    Greedy when N > L.
    """
    B, N, L = dist.shape
    if N > L:
        return greedy_assignment(dist)
    if L**N <= 4096:
        return enumerated_assignment(dist)
    rows = torch.arange(B)
    inf = float("inf")
    cost = torch.zeros(B, N + 1, L + 1, dtype=dist.dtype)  # [B, N + 1, L + 1]
    cost[:, 1:, 1:] = dist
    u = torch.zeros(B, N + 1, dtype=dist.dtype)  # row potentials
    v = torch.zeros(B, L + 1, dtype=dist.dtype)  # column potentials
    owner = torch.zeros(B, L + 1, dtype=torch.long)  # row matched to each column (0 = free)
    way = torch.zeros(B, L + 1, dtype=torch.long)  # previous column on the augmenting path
    for row in range(1, N + 1):
        owner[:, 0] = row
        col = torch.zeros(B, dtype=torch.long)  # [B]
        slack = torch.full((B, L + 1), inf, dtype=dist.dtype)
        used = torch.zeros(B, L + 1, dtype=torch.bool)
        searching = torch.ones(B, dtype=torch.bool)
        for _ in range(row):  # row - 1 columns are taken: a free one is at most `row` steps away
            if not searching.any():  # usually after a step or two: stop early
                break
            used[rows, col] |= searching
            here = owner[rows, col]  # [B]
            reduced = cost[rows, here] - u[rows, here][:, None] - v  # [B, L + 1]
            better = searching[:, None] & ~used & (reduced < slack)
            slack = torch.where(better, reduced, slack)
            way = torch.where(better, col[:, None], way)
            delta, nxt = torch.where(used, inf, slack).min(dim=1)
            delta = torch.where(searching, delta, 0.0)[:, None]  # [B, 1]
            u.scatter_add_(1, owner, torch.where(used, delta, 0.0))
            v = v - torch.where(used, delta, 0.0)
            slack = slack - torch.where(used, 0.0, delta)
            col = torch.where(searching, nxt, col)
            searching = searching & (owner[rows, col] != 0)
        for _ in range(row):  # flip the matching along the path back to the dummy column
            moving = col != 0
            if not moving.any():
                break
            back = way[rows, col]
            owner[rows, col] = torch.where(moving, owner[rows, back], owner[rows, col])
            col = torch.where(moving, back, col)
    assigned = torch.zeros(B, N + 1, dtype=torch.long)
    assigned.scatter_(1, owner[:, 1:], torch.arange(L).expand(B, L))  # free columns land on row 0
    return assigned[:, 1:]
'''

FEATURE_MEANING = {
    "landmark_dist": "distance to each observed landmark",
    "sorted_landmarks": "landmark offsets sorted nearest first",
    "nearest_landmark": "offset and distance of the nearest landmark",
    "occupancy": "per landmark, whether another observed agent sits on it",
    "free_landmark": "offset and distance of the nearest landmark no other agent is closer to",
    "nearest_agent": "distance to the nearest observed agent",
    "speed": "own speed",
}
FEATURE_CODE = {
    "landmark_dist": ["features.append(landmark_dist)"],
    "sorted_landmarks": [
        "order = landmark_dist.argsort(dim=-1)  # [M, Ls]",
        "features.append(landmarks.gather(1, order[..., None].expand(-1, -1, 2)).reshape(M, -1))",
    ],
    "nearest_landmark": [
        "nearest = landmark_dist.argmin(dim=-1)  # [M]",
        "nearest_offset = landmarks[torch.arange(M), nearest]  # [M, 2]",
        "features.append(torch.cat([nearest_offset, landmark_dist.min(dim=-1, keepdim=True).values], dim=-1))",
    ],
    "occupancy": [
        f"features.append((claim_dist < {SEEN_OCCUPIED_DIST}).float() * landmark_seen.float())  # [M, Ls]",
    ],
    "free_landmark": [
        "claimed = (claim_dist < landmark_dist) | ~landmark_seen  # [M, Ls]: someone else is closer",
        f"free = (landmark_dist + {FAR} * claimed.float()).argmin(dim=-1)  # [M]",
        "free_offset = landmarks[torch.arange(M), free]  # [M, 2]",
        "features.append(torch.cat([free_offset, landmark_dist.gather(1, free[:, None])], dim=-1))",
    ],
    "nearest_agent": ["features.append(other_dist.min(dim=-1, keepdim=True).values)"],
    "speed": ["features.append(torch.linalg.norm(obs[:, {self_vel}], dim=-1, keepdim=True))"],
}


def render(genome: Genome, task: Problem) -> str:
    """The candidate module for `genome`; OEF slices come from the task's `obs_layout`,
    reward thresholds from its TaskSpec notes."""
    header = [
        '"""Hybrid reward and observation enhancement written by lero\'s offline designer.',
        "",
        "Reward terms (weight, schedule):",
        *(
            f"- {t.kind} ({t.weight:+.3g}, {t.schedule}): {TERM_MEANING[t.kind]}"
            for t in genome.terms
        ),
        "Observation features:",
        *(f"- {f}: {FEATURE_MEANING[f]}" for f in genome.features),
        '"""',
        f"{GENOME_TAG}{genome.to_json()}",
        "import torch",
        "",
    ]
    helpers = []
    if genome.needs_assignment():
        helpers.append(GREEDY_HELPER)
        if genome.assignment == "optimal":
            helpers.append(OPTIMAL_HELPER)
    parts = [
        "\n".join(header),
        *helpers,
        _render_reward(genome, task.task_spec.notes),
        _render_features(genome, task.obs_layout),
        *_render_potential(genome, task.task_spec.notes),
    ]
    return "\n\n".join(part.strip("\n") + "\n" for part in parts).replace("\n\n\n\n", "\n\n\n")


def _distances(state: str, assignment: str | None) -> list[str]:
    """The lines reading positions off STATE (`ctx.state` or `state`) into `dist` [B, N, L],
    and with an ASSIGNMENT each agent's landmark `target` and its `target_dist`."""
    lines = [
        f'    agent_pos = {state}["agent_pos"]  # [B, N, 2]',
        f'    agent_vel = {state}["agent_vel"]  # [B, N, 2]',
        f'    landmark_pos = {state}["landmark_pos"]  # [B, L, 2]',
        "    dist = torch.linalg.norm(agent_pos[:, :, None, :] - landmark_pos[:, None, :, :], dim=-1)  # [B, N, L]",
    ]
    if assignment:
        lines += [
            f"    target = {assignment}_assignment(dist)  # [B, N] landmark index per agent",
            "    target_dist = dist.gather(2, target[..., None]).squeeze(-1)  # [B, N]",
        ]
    return lines


def _render_potential(genome: Genome, notes: dict) -> list[str]:
    """`potential(state, obs)` -> Phi [B, N], the sum of the genome's potential terms (none: [])."""
    potentials = [t for t in genome.terms if t.kind in POTENTIAL_OF]
    if not potentials:
        return []
    needs = any(t.kind == "assigned_potential" for t in potentials)
    lines = [
        "def potential(state, obs):",
        '    """Phi [B, N] of one state: the potential terms listed above (lero adds gamma Phi(s\') - Phi(s))."""',
        *_distances("state", genome.assignment if needs else None),
        "    phi = torch.zeros(dist.shape[0], dist.shape[1], dtype=torch.float32, device=dist.device)  # [B, N]",
    ]
    for term in potentials:
        broadcast = "[:, None]" if POTENTIAL_OF[term.kind] in TEAM_TERMS else ""  # a team Phi: every agent's
        lines += [f"    # term: {term.kind}",
                  f"    phi = phi + ({term.weight!r} * ({raw_term(term.kind, notes)})).float(){broadcast}"]
    lines.append("    return phi")
    return ["\n".join(lines)]


def _render_reward(genome: Genome, notes: dict) -> str:
    kinds = {t.kind for t in genome.terms}
    rewarded = [t for t in genome.terms if t.kind not in POTENTIAL_OF]
    lines = [
        "def hybrid_reward(ctx):",
        '    """Per-agent rewards [B, N] as the weighted sum of the terms listed above."""',
        "    progress = float(ctx.progress)",
        *_distances("ctx.state", genome.assignment if genome.needs_assignment() else None),
    ]
    if "approach" in kinds:
        lines += [
            "    target_pos = landmark_pos.gather(1, target[..., None].expand(-1, -1, 2))  # [B, N, 2]",
            "    heading = (target_pos - agent_pos) / (target_dist[..., None] + 1e-6)  # [B, N, 2] unit",
        ]
    if kinds & {"collision", "spread"}:
        lines += [
            "    gaps = torch.linalg.norm(agent_pos[:, :, None, :] - agent_pos[:, None, :, :], dim=-1)  # [B, N, N]",
            f"    gaps = gaps + {FAR} * torch.eye(gaps.shape[1], dtype=gaps.dtype, device=gaps.device)",
        ]
    lines.append("    components = {}")
    for term in rewarded:
        shape = "[B]" if term.kind in TEAM_TERMS else "[B, N]"
        lines += [
            f"    # term: {term.kind}",
            f'    components["{term.kind}"] = {_weighted(term, notes)}  # {shape}',
        ]
    lines += [
        "    reward = torch.zeros_like(ctx.env_reward)  # [B, N]",
        "    for value in components.values():",
        "        reward = reward + (value[:, None] if value.dim() == 1 else value)",
        "    return reward, components",
    ]
    return "\n".join(lines)


def _weighted(term: Term, notes: dict) -> str:
    raw = raw_term(term.kind, notes)
    return f"{term.weight!r} * {SCHEDULE_FACTOR[term.schedule]}({raw})"


def _render_features(genome: Genome, obs_layout: dict[str, tuple[int, int]]) -> str:
    slots = {name: f"{start}:{end}" for name, (start, end) in obs_layout.items()}
    needed = {slot for feature in genome.features for slot in FEATURE_SLOTS[feature]}
    missing = needed - set(slots)
    if missing:
        raise ValueError(
            f"obs_layout lacks slot(s) {sorted(missing)} needed by the chosen features"
        )
    lines = [
        "def enhance_observation(obs):",
        '    """Append features inferred from this agent\'s own observation [M, D] -> [M, D + k]."""',
        "    M = obs.shape[0]",
    ]
    if "landmark_rel" in needed:
        lines += [
            f"    landmarks = obs[:, {slots['landmark_rel']}].reshape(M, -1, 2)  # [M, Ls, 2] landmark - self",
            "    landmark_seen = landmarks.abs().sum(dim=-1) > 0  # [M, Ls]; zero slots are padding",
            "    landmark_dist = torch.linalg.norm(landmarks, dim=-1)  # [M, Ls]",
            f"    landmark_dist = torch.where(landmark_seen, landmark_dist, torch.full_like(landmark_dist, {FAR}))",
        ]
    if "other_rel" in needed:
        lines += [
            f"    others = obs[:, {slots['other_rel']}].reshape(M, -1, 2)  # [M, As, 2] other - self",
            "    other_seen = others.abs().sum(dim=-1) > 0  # [M, As]",
            "    other_dist = torch.linalg.norm(others, dim=-1)  # [M, As]",
            f"    other_dist = torch.where(other_seen, other_dist, torch.full_like(other_dist, {FAR}))",
        ]
    if {"occupancy", "free_landmark"} & set(genome.features):
        lines += [
            "    between = torch.linalg.norm(others[:, None, :, :] - landmarks[:, :, None, :], dim=-1)  # [M, Ls, As]",
            f"    between = torch.where(other_seen[:, None, :], between, torch.full_like(between, {FAR}))",
            "    claim_dist = between.min(dim=-1).values  # [M, Ls] closest other agent to each landmark",
        ]
    lines.append("    features = []")
    for feature in genome.features:
        lines.append(f"    # feature: {feature}")
        lines += ["    " + line.format(**slots) for line in FEATURE_CODE[feature]]
    lines.append("    return torch.cat([obs, *features], dim=-1)")
    return "\n".join(lines)


def gene_at_line(code: str, line: int) -> str | None:
    """`term:kind` / `feature:name` of the marked block containing 1-based `line`, if any."""
    lines = code.splitlines()
    for text in reversed(lines[: max(0, min(line, len(lines)))]):
        marker = re.match(r"\s*# (term|feature): (\w+)", text)
        if marker:
            return f"{marker[1]}:{marker[2]}"
        if re.match(r"def |    return |    reward = ", text):
            return None  # the line is outside every marked block
    return None
