"""The generic grammar: offline candidates for any task, derived from its state fields.

Used when the environment names no grammar of its own (``TaskSpec.grammar is None``), and
under the task grammars of `task_grammars.py`, which add their own goal, communication
and feature genes to the env-reward terms here. What the task offers decides which genes
exist (`Vocabulary`):

- reward terms on the environment's own reward, always: ``env`` (own reward), ``team_mean``
  and ``team_min`` (shared, [B]), ``others_mean`` (the other agents' mean: altruism);
- distance terms only when the state has position-like fields (name containing ``pos``,
  shape ``[B, N, k]`` for agents, ``[B, X, k]`` for targets): ``target_nearest``,
  ``target_cover`` (team), ``agent_spread``; and ``speed`` with a ``vel`` field;
- ``paired_goal`` where the task pairs each agent with an entity of its own (``TaskSpec.pairings``,
  a ``[B, N, k]`` position field: VMAS navigation's ``goal_pos``): minus the distance to it;
- potential forms of the distance terms (``POTENTIALS``: ``paired_goal_potential``,
  ``target_nearest_potential``, ``target_cover_potential``): rendered into the module's
  ``potential(state, obs)``, so lero adds F = gamma Phi(s') - Phi(s) (training.shaping) and
  the optimal policies stay the task's; their schedule is always ``constant`` (Phi may not
  change over training). A sparse task's prior is its own reward plus ``paired_goal_potential``;
- observation features computed from the agent's own obs only: ``norm``, ``abs_max``,
  ``nonzero`` (share of non-zero entries: tells padding, hence roles, apart), ``pair_norms``
  (lengths of consecutive coordinate pairs), ``clipped`` (a copy clipped to [-1, 1]).

A genome is (terms, features); each term is (kind, weight, schedule) as in the task
grammar. Modules embed it as ``# lero-generic-genome: {...}`` so elites can be bred.
"""

from __future__ import annotations

import json
import math
import random
import re
import statistics
from dataclasses import dataclass, field

from lero.agents import bounded_json
from lero.agents.bounded_json import finite_float
from lero.agents.offline.genome import WEIGHT_MAX
from lero.agents.offline.render import gene_at_line
from lero.agents.offline.task_grammars import TASK_GRAMMARS
from lero.agents.records import Problem

GENOME_TAG = "# lero-generic-genome: "
SCHEDULES = ("constant", "ramp_up", "ramp_down")
SCHEDULE_FACTOR = {"constant": "", "ramp_up": "progress * ", "ramp_down": "(1.0 - progress) * "}
TASK_TERMS = ("env", "team_mean")  # a genome keeps at least one: the task's own reward
FAR = 10.0  # the distance standing in for "no other agent"
DOMINANT_RATIO, DOMINANT_RESCALE, NEAR_CONSTANT = 10.0, 0.3, 1e-3

# kind -> (needs, shape, raw expression, meaning); needs: "" | "pos" | "target" | "vel"
TERMS: dict[str, tuple[str, str, str, str]] = {
    "env": ("", "[B, N]", "ctx.env_reward", "the agent's own environment reward"),
    "team_mean": (
        "",
        "[B]",
        "ctx.env_reward.mean(dim=1)",
        "team: the agents' mean environment reward",
    ),
    "team_min": (
        "",
        "[B]",
        "ctx.env_reward.min(dim=1).values",
        "team: the worst agent's environment reward",
    ),
    "others_mean": (
        "",
        "[B, N]",
        "(ctx.env_reward.sum(dim=1, keepdim=True) - ctx.env_reward) / max(n_agents - 1, 1)",
        "the other agents' mean environment reward",
    ),
    "target_nearest": (
        "target",
        "[B, N]",
        "-dist.min(dim=-1).values",
        "minus the distance to the nearest target",
    ),
    "target_cover": (
        "target",
        "[B]",
        "-dist.min(dim=1).values.sum(dim=-1)",
        "team: minus the summed distance from each target to its closest agent",
    ),
    "agent_spread": (
        "pos",
        "[B, N]",
        "gaps.min(dim=-1).values.clamp(max=0.5)",
        "distance to the closest other agent, capped at 0.5",
    ),
    "speed": ("vel", "[B, N]", "-torch.linalg.norm(agent_vel, dim=-1)", "minus the agent's speed"),
    "paired_goal": ("pair", "[B, N]", "-own_dist", "minus the distance to the agent's own goal"),
    "paired_goal_potential": ("pair", "[B, N]", "-own_dist", "potential Phi: minus the distance to the agent's "
                           "own goal (lero adds gamma Phi(s') - Phi(s): policy-invariant shaping)"),
    "target_nearest_potential": ("target", "[B, N]", "-dist.min(dim=-1).values", "potential Phi: minus the "
                                 "distance to the nearest target (policy-invariant shaping)"),
    "target_cover_potential": ("target", "[B]", "-dist.min(dim=1).values.sum(dim=-1)", "potential Phi, team: "
                               "minus the summed distance from each target to its closest agent"),
}
# terms rendered into `potential(state, obs)` rather than `hybrid_reward(ctx)`
POTENTIALS = ("paired_goal_potential", "target_nearest_potential", "target_cover_potential")
FEATURES: dict[str, tuple[str, str]] = {  # name -> (expression on obs [M, D], meaning)
    "norm": ("torch.linalg.norm(obs, dim=-1, keepdim=True)", "length of the observation vector"),
    "abs_max": ("obs.abs().max(dim=-1, keepdim=True).values", "largest absolute entry"),
    "nonzero": ("(obs != 0).float().mean(dim=-1, keepdim=True)", "share of non-zero entries"),
    "pair_norms": (
        "torch.linalg.norm(obs[:, : D - D % 2].reshape(M, -1, 2), dim=-1)",
        "length of each consecutive (x, y) pair of entries",
    ),
    "clipped": ("obs.clamp(-1.0, 1.0)", "the observation clipped to [-1, 1]"),
}


TERM_ORDER = tuple(dict.fromkeys([*TERMS, *(k for g in TASK_GRAMMARS.values() for k in g.terms)]))
FEATURE_ORDER = tuple(dict.fromkeys([*FEATURES, *(f for g in TASK_GRAMMARS.values() for f in g.features)]))
GOALS = frozenset([*TASK_TERMS, *(k for g in TASK_GRAMMARS.values() for k in g.goals)])
# every grammar's potential terms (the generic ones and each task grammar's declared `potentials`)
ALL_POTENTIALS = frozenset([*POTENTIALS, *(k for g in TASK_GRAMMARS.values() for k in g.potentials)])


@dataclass(frozen=True)
class Vocabulary:
    """The genes one task offers, and the state fields the distance terms read. Under a
    task grammar (`grammar`), its goal and message terms and its features, with the
    task's constants and obs columns filled in (`task_terms`, `task_features`)."""

    terms: tuple[str, ...]
    features: tuple[str, ...]
    agent_pos: str | None = None
    agent_vel: str | None = None
    target_pos: str | None = None
    own_goal: str | None = None  # the paired [B, N, k] field: row i is agent i's own goal
    sparse: bool = False  # the task's native reward is sparse: the prior shapes through a potential
    grammar: str | None = None
    goals: tuple[str, ...] = TASK_TERMS
    task_terms: dict[str, tuple[str, str, str]] = field(default_factory=dict)  # kind -> (shape, raw, meaning)
    task_features: dict[str, tuple[str, str]] = field(default_factory=dict)  # name -> (expression, meaning)
    feature_setup: tuple[str, ...] = ()

    @classmethod
    def of(cls, task: Problem) -> Vocabulary:
        if task.task_spec.grammar in TASK_GRAMMARS:
            return cls._of_grammar(task)
        fields = {f.name: _dims(f.shape) for f in task.task_spec.state_fields}
        per_agent = {
            name for name, dims in fields.items() if dims[1:2] in (["N"], [str(task.n_agents)])
        }
        vectors = [name for name, dims in fields.items() if len(dims) == 3 and dims[2].isdigit()]
        agent_pos = _pick(vectors, "pos", per_agent, agent=True)
        target_pos = _pick([v for v in vectors if v != agent_pos], "pos", None, agent=False)
        agent_vel = _pick(vectors, "vel", per_agent, agent=True)
        own_goal = next((p.field for p in task.task_spec.pairings if agent_pos and p.field in per_agent
                         and fields[p.field][2:] == fields[agent_pos][2:]), None)
        have = {""} | ({"pos"} if agent_pos else set())
        have |= {"target"} if agent_pos and target_pos else set()
        have |= {"vel"} if agent_vel else set()
        have |= {"pair"} if own_goal else set()
        reserved = set(task.task_spec.metric_names) | {"steps", "return", "train_reward"}
        terms = tuple(k for k, spec in TERMS.items() if spec[0] in have and k not in reserved)
        features = tuple(f for f in FEATURES if f != "pair_norms" or task.obs_dim >= 2)
        return cls(terms, features, agent_pos, agent_vel, target_pos, own_goal, task.task_spec.sparse)

    @classmethod
    def _of_grammar(cls, task: Problem) -> Vocabulary:
        """The env-reward terms plus the task grammar's genes, filled in for this task."""
        grammar = TASK_GRAMMARS[task.task_spec.grammar]
        missing = [slot for slot in grammar.slots if slot not in task.obs_layout]
        if missing:
            raise ValueError(f"the {grammar.name} grammar needs obs_layout slot(s) {missing}")
        slots = {name: f"{start}:{end}" for name, (start, end) in task.obs_layout.items()}
        notes = task.task_spec.notes
        task_terms = {k: (shape, raw.format(**notes), meaning) for k, (shape, raw, meaning) in grammar.terms.items()}
        task_features = {f: (code.format(**slots), meaning) for f, (code, meaning) in grammar.features.items()}
        own_reward = tuple(k for k, spec in TERMS.items() if spec[0] == "")
        return cls(terms=(*own_reward, *grammar.terms), features=tuple(grammar.features), grammar=grammar.name,
                   goals=(*TASK_TERMS, *grammar.goals), task_terms=task_terms, task_features=task_features,
                   feature_setup=tuple(line.format(**slots) for line in grammar.feature_setup))

    def term(self, kind: str) -> tuple[str, str, str]:
        """(shape, raw expression, meaning) of a reward term of this vocabulary."""
        if kind in self.task_terms:
            return self.task_terms[kind]
        _, shape, raw, meaning = TERMS[kind]
        return shape, raw, meaning

    def feature(self, name: str) -> tuple[str, str]:
        """(expression on obs, meaning) of an observation feature of this vocabulary."""
        return self.task_features.get(name) or FEATURES[name]

    def meanings(self) -> dict[str, str]:
        """Every gene's meaning in words (for prompts)."""
        return {**{k: self.term(k)[2] for k in self.terms}, **{f: self.feature(f)[1] for f in self.features}}


def _dims(shape: str) -> list[str]:
    return [part.strip() for part in shape.strip("[] ").split(",") if part.strip()]


def _pick(vectors: list[str], word: str, per_agent: set[str] | None, agent: bool) -> str | None:
    """The ``[B, *, k]`` field named like ``word``: per agent (``agent_*`` first) or not of agents."""
    named = [v for v in vectors if word in v.lower()]
    if agent:
        ranked = sorted(
            (v for v in named if v in per_agent), key=lambda v: "agent" not in v.lower()
        )
    else:
        ranked = [v for v in named if "agent" not in v.lower()]
    return ranked[0] if ranked else None


@dataclass(frozen=True)
class GenericGenome:
    terms: tuple[tuple[str, float, str], ...]  # (kind, weight, schedule), in TERMS order
    features: tuple[str, ...]  # in FEATURES order

    @classmethod
    def build(
        cls, terms: dict[str, tuple[float, str]], features: set[str] | tuple[str, ...]
    ) -> GenericGenome:
        if not any(kind in terms for kind in GOALS):
            raise ValueError(f"a generic genome needs a task term ({', '.join(sorted(GOALS))})")
        ordered = tuple((k, round(min(terms[k][0], WEIGHT_MAX), 4), "constant" if k in ALL_POTENTIALS else terms[k][1])
                        for k in TERM_ORDER if k in terms)
        return cls(ordered, tuple(f for f in FEATURE_ORDER if f in set(features)))

    def term_map(self) -> dict[str, tuple[float, str]]:
        return {kind: (weight, schedule) for kind, weight, schedule in self.terms}

    def to_json(self) -> str:
        return json.dumps(
            {"terms": [list(t) for t in self.terms], "features": list(self.features)},
            separators=(",", ":"),
        )

    @classmethod
    def of_code(cls, code: str, vocab: Vocabulary) -> GenericGenome | None:
        """The genome a generic module embeds, kept to `vocab`'s genes; None for any other code."""
        for line in code.splitlines():
            if line.startswith(GENOME_TAG):
                try:
                    body = bounded_json.loads(line[len(GENOME_TAG) :])  # a model may have edited it
                    terms = {str(k): (finite_float(w), str(s)) for k, w, s in body["terms"] if k in vocab.terms}
                    return cls.build(terms, tuple(f for f in body["features"] if f in vocab.features))
                except (ValueError, KeyError, TypeError):
                    return None
        return None


def prior(vocab: Vocabulary) -> GenericGenome:
    """The first guess: own reward mixed with the team's, a fading distance hint when there is
    one; a task grammar's own first guess under a task grammar."""
    if vocab.grammar is not None:
        grammar = TASK_GRAMMARS[vocab.grammar]
        return GenericGenome.build(grammar.prior_terms, grammar.prior_features)
    features = {"norm", "pair_norms"} & set(vocab.features) or {vocab.features[0]}
    if vocab.sparse and "paired_goal_potential" in vocab.terms:  # the native reward, shaped toward one's own goal
        return GenericGenome.build({"env": (1.0, "constant"), "paired_goal_potential": (1.0, "constant")}, features)
    terms = {"env": (0.5, "constant"), "team_mean": (0.5, "constant")}
    if "target_nearest" in vocab.terms:
        terms["target_nearest"] = (0.3, "ramp_down")
    return GenericGenome.build(terms, features)


def sample(rng: random.Random, vocab: Vocabulary) -> GenericGenome:
    """A fresh sample: one task term, up to two others, one to three features."""
    task = rng.choice(vocab.goals)
    others = [k for k in vocab.terms if k != task]
    extras = rng.sample(others, k=min(len(others), rng.randint(0, 2)))
    terms = {kind: (_weight(rng), rng.choice(SCHEDULES)) for kind in extras}
    terms[task] = (_weight(rng), "constant")
    features = rng.sample(vocab.features, k=rng.randint(1, min(3, len(vocab.features))))
    return GenericGenome.build(terms, set(features))


def mutate(
    genome: GenericGenome, rng: random.Random, vocab: Vocabulary
) -> tuple[GenericGenome, str]:
    """One edit: reweight or reschedule a term, add or drop a term, toggle a feature."""
    terms, features = genome.term_map(), set(genome.features)
    for _ in range(20):
        move = rng.choice(("reweight", "reschedule", "add", "drop", "feature"))
        kind = rng.choice(list(terms))
        weight, schedule = terms[kind]
        if move == "reweight":
            factor = math.exp(rng.gauss(0.0, 0.5))
            return _with(
                genome, {**terms, kind: (weight * factor, schedule)}
            ), f"{kind} weight x{factor:.2f}"
        if move == "reschedule":
            new = rng.choice([s for s in SCHEDULES if s != schedule])
            return _with(genome, {**terms, kind: (weight, new)}), f"{kind} schedule -> {new}"
        missing = [k for k in vocab.terms if k not in terms]
        if move == "add" and missing:
            added = rng.choice(missing)
            return _with(
                genome, {**terms, added: (_weight(rng), rng.choice(SCHEDULES))}
            ), f"added {added}"
        rest = {k: v for k, v in terms.items() if k != kind}
        if move == "drop" and any(k in GOALS for k in rest):
            return _with(genome, rest), f"dropped {kind}"
        if move == "feature":
            feature = rng.choice(vocab.features)
            if feature in features and len(features) > 1:
                return GenericGenome.build(
                    terms, features - {feature}
                ), f"dropped feature {feature}"
            if feature not in features:
                return GenericGenome.build(terms, features | {feature}), f"added feature {feature}"
    return _with(genome, terms), "unchanged"


def crossover(first: GenericGenome, second: GenericGenome, rng: random.Random) -> GenericGenome:
    """Every term and feature of either parent is inherited from one of them at random."""
    a, b = first.term_map(), second.term_map()
    terms = {
        k: rng.choice([v for v in (a.get(k), b.get(k)) if v])
        for k in {*a, *b}
        if (k in a and k in b) or rng.random() < 0.5
    }
    if not any(k in GOALS for k in terms):
        terms.update({k: v for k, v in a.items() if k in GOALS})
    features = {f for f in {*first.features, *second.features} if rng.random() < 0.5} or set(
        first.features
    )
    return GenericGenome.build(terms, features)


def guided(genome: GenericGenome, stats: dict[str, dict]) -> tuple[GenericGenome, list[str]]:
    """Reflection tips applied mechanically: rescale a dominating component, drop a flat one."""
    terms, notes = genome.term_map(), []
    magnitudes = {k: abs(float(stats[k]["mean"])) for k in terms if k in stats}
    for kind, magnitude in magnitudes.items():
        rest = [m for other, m in magnitudes.items() if other != kind]
        if rest and magnitude >= DOMINANT_RATIO * max(statistics.median(rest), 1e-8):
            terms[kind] = (terms[kind][0] * DOMINANT_RESCALE, terms[kind][1])
            notes.append(f"{kind} dominated the reward: rescaled x{DOMINANT_RESCALE}")
    for kind in [k for k in terms if k in stats]:
        low, high, mean = (float(stats[kind][key]) for key in ("min", "max", "mean"))
        rest = {k: v for k, v in terms.items() if k != kind}
        if high - low <= NEAR_CONSTANT * max(1.0, abs(mean)) and any(k in GOALS for k in rest):
            terms = rest
            notes.append(f"{kind} was near constant: dropped")
    return _with(genome, terms), notes


def _state_setup(kinds: set[str], vocab: Vocabulary, state: str) -> list[str]:
    """The lines that read the distance terms' tensors off STATE (`ctx.state` or `state`)."""
    lines = []
    if kinds & {"target_nearest", "target_cover", "agent_spread", "paired_goal", *POTENTIALS}:
        lines.append(f'agent_pos = {state}["{vocab.agent_pos}"]  # [B, N, k]')
    if kinds & {"target_nearest", "target_cover", "target_nearest_potential", "target_cover_potential"}:
        lines += [
            f'target_pos = {state}["{vocab.target_pos}"]  # [B, X, k]',
            "dist = torch.linalg.norm(agent_pos[:, :, None, :] - target_pos[:, None, :, :], dim=-1)  # [B, N, X]",
        ]
    if kinds & {"paired_goal", "paired_goal_potential"}:
        lines.append(f'own_dist = torch.linalg.norm(agent_pos - {state}["{vocab.own_goal}"], dim=-1)  # [B, N]')
    return lines


def _task_setup(kinds: set[str], vocab: Vocabulary, state: str) -> list[str]:
    """The task grammar's setup lines (indented) reading STATE, where KINDS use its terms."""
    if not kinds & set(vocab.task_terms):
        return []
    return [f"    {line.format(state=state)}" for line in TASK_GRAMMARS[vocab.grammar].reward_setup]


def render(genome: GenericGenome, vocab: Vocabulary) -> str:
    """The candidate module: a docstring listing the genes, the genome tag, both functions
    (and `potential` when the genome has potential terms)."""
    kinds = {kind for kind, _, _ in genome.terms if kind not in ALL_POTENTIALS}
    potentials = [(kind, weight) for kind, weight, _ in genome.terms if kind in ALL_POTENTIALS]
    header = [
        f'"""Hybrid reward and observation enhancement written by lero\'s offline designer ({vocab.grammar or "generic"} grammar).',
        "",
        "Reward terms (weight, schedule):",
        *(f"- {k} ({w:+.3g}, {s}): {vocab.term(k)[2]}" for k, w, s in genome.terms),
        "Observation features (from the agent's own obs):",
        *(f"- {f}: {vocab.feature(f)[1]}" for f in genome.features),
        '"""',
        f"{GENOME_TAG}{genome.to_json()}",
        "import torch",
    ]
    reward = [
        "def hybrid_reward(ctx):",
        '    """Per-agent rewards [B, N] as the weighted sum of the terms listed above."""',
        "    progress = float(ctx.progress)",
        "    n_agents = ctx.env_reward.shape[1]",
        *(f"    {line}" for line in _state_setup(kinds, vocab, "ctx.state")),
    ]
    if "agent_spread" in kinds:
        reward += [
            "    gaps = torch.linalg.norm(agent_pos[:, :, None, :] - agent_pos[:, None, :, :], dim=-1)  # [B, N, N]",
            f"    gaps = gaps + {FAR} * torch.eye(n_agents, dtype=gaps.dtype, device=gaps.device)",
        ]
    if "speed" in kinds:
        reward.append(f'    agent_vel = ctx.state["{vocab.agent_vel}"]  # [B, N, k]')
    reward += _task_setup(kinds, vocab, "ctx.state")
    reward.append("    components = {}")
    for kind, weight, schedule in genome.terms:
        if kind in ALL_POTENTIALS:
            continue
        shape, raw, _ = vocab.term(kind)
        reward += [
            f"    # term: {kind}",
            f'    components["{kind}"] = ({weight!r} * {SCHEDULE_FACTOR[schedule]}({raw})).float()  # {shape}',
        ]
    reward += [
        "    reward = torch.zeros_like(ctx.env_reward)  # [B, N]",
        "    for value in components.values():",
        "        reward = reward + (value[:, None] if value.dim() == 1 else value)",
        "    return reward, components",
    ]
    oef = [
        "def enhance_observation(obs):",
        '    """Append features of this agent\'s own observation [M, D] -> [M, D + k]."""',
        "    M, D = obs.shape",
    ]
    if set(genome.features) & set(vocab.task_features):
        oef += [f"    {line}" for line in vocab.feature_setup]
    oef.append("    features = []")
    for feature in genome.features:
        oef += [f"    # feature: {feature}", f"    features.append({vocab.feature(feature)[0]})"]
    oef.append("    return torch.cat([obs, *features], dim=-1)")
    parts = [header, reward, oef]
    if potentials:
        phi = [
            "def potential(state, obs):",
            '    """Phi [B, N] of one state: the potential terms listed above (lero adds gamma Phi(s\') - Phi(s))."""',
            "    n_agents = obs.shape[1]",
            *(f"    {line}" for line in _state_setup({kind for kind, _ in potentials}, vocab, "state")),
            *_task_setup({kind for kind, _ in potentials}, vocab, "state"),
            "    phi = torch.zeros(obs.shape[0], n_agents, dtype=torch.float32, device=obs.device)  # [B, N]",
        ]
        for kind, weight in potentials:
            shape, raw, _ = vocab.term(kind)
            broadcast = "[:, None]" if shape == "[B]" else ""  # a team potential: every agent's
            phi += [f"    # term: {kind}", f"    phi = phi + ({weight!r} * ({raw})).float(){broadcast}  # {shape}"]
        phi.append("    return phi")
        parts.append(phi)
    return "\n\n\n".join("\n".join(part) for part in parts) + "\n"


def without_culprit(
    genome: GenericGenome, code: str, error: str
) -> tuple[GenericGenome | None, str]:
    """The genome minus the term or feature whose marked block the traceback points at."""
    for number in reversed([int(n) for n in re.findall(r"line (\d+)", error)]):
        gene = gene_at_line(code, number)
        if gene is None:
            continue
        kind, name = gene.split(":")
        terms, features = genome.term_map(), set(genome.features)
        rest = {k: v for k, v in terms.items() if k != name}
        if kind == "feature" and len(features) > 1:
            return GenericGenome.build(
                terms, features - {name}
            ), f"dropped feature {name} (line {number} failed)"
        if kind == "term" and any(k in GOALS for k in rest):
            return _with(genome, rest), f"dropped term {name} (line {number} failed)"
    return None, ""


def _with(genome: GenericGenome, terms: dict[str, tuple[float, str]]) -> GenericGenome:
    return GenericGenome.build(terms, genome.features)


def _weight(rng: random.Random) -> float:
    """Log-uniform in [0.2, 2]: terms start near the scale of the env reward."""
    return round(math.exp(rng.uniform(math.log(0.2), math.log(2.0))), 3)
