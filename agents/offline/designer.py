"""The offline designer and debugger: the LLM roles played by a program synthesiser.

Same interface as the LLM designer/debugger, so the graph cannot tell them apart.
Every draft is a readable module rendered from a genome (`genome.py`, grammar in
`agents/prompts/offline_grammar.md`), deterministic given `LLMConfig.seed` and the
inputs (elites, feedback, error): the random generator is seeded from their hash,
so a resumed run proposes the same candidates.
"""

from __future__ import annotations

import hashlib
import json
import random
import re

from lero.agents.offline.evolve import (
    Child,
    apply_feedback,
    crossover,
    guided,
    mutate,
    prior_genome,
    random_genome,
)
from lero.agents.offline.genome import FEATURE_SLOTS, TASK_TERMS, Genome, genome_of
from lero.agents.offline.render import gene_at_line, render
from lero.agents.types import Draft, Elite, Review, TaskSpec

SUPPORTED_ENVS = ("simple_spread",)
EXPLORE = 0.15  # share of later-generation children sampled fresh instead of bred
CROSSOVER = 0.4
MAX_TRIES_PER_CHILD = 50


class OfflineDesigner:
    """Writes K distinct candidates per call: a prior first, then bred from the elites.

    It remembers the designs it already proposed in this process and does not propose
    them again (after a resume the sandbox's result cache catches repeats instead).
    """

    def __init__(self, seed: int = 0, prior: bool = True):
        self.seed = seed
        self.prior = prior  # False: generation 0 is sampled, no hand-written head start
        self.proposed: set[Genome] = set()

    def design(
        self,
        task: TaskSpec,
        k: int,
        elites: list[Elite],
        reflection: str,
        feedback: str | None = None,
    ) -> list[Draft]:
        _check_task(task)
        if k < 1:
            raise ValueError(f"k must be >= 1, got {k}")
        rng = self.rng("design", k, sorted(e.code for e in elites), feedback or "")
        ranked = sorted(elites, key=lambda e: e.fitness, reverse=True)
        parents = [(elite, g) for elite in ranked if (g := genome_of(elite.code)) is not None]
        seen = self.proposed | {genome for _, genome in parents}
        children: list[Child] = []
        for attempt in range(k * MAX_TRIES_PER_CHILD):
            if len(children) == k:
                break
            exploit = not children and attempt == 0  # the best elite with only the guided edits
            child = self._child(task, rng, parents, index=len(children), exploit=exploit)
            if feedback:
                genome, notes = apply_feedback(child.genome, feedback)
                child = Child(genome, (*child.notes, *notes))
            child = Child(fit_to_layout(child.genome, task), child.notes)
            if child.genome not in seen:
                seen.add(child.genome)
                children.append(child)
        self.proposed |= {child.genome for child in children}
        return [self.draft(task, child, "offline") for child in children]

    def revise(self, task: TaskSpec, code: str, review: Review) -> Draft:
        """One mutation of the reviewed design (a fresh sample when the code is not ours)."""
        _check_task(task)
        rng = self.rng("revise", code, review.text)
        genome = genome_of(code)
        if genome is None:
            child = Child(
                random_genome(rng, task.n_agents),
                ("fresh sample: the reviewed code has no genome",),
            )
        else:
            mutated, note = mutate(genome, rng, task.n_agents)
            child = Child(mutated, (f"revised after review: {note}",))
        return self.draft(
            task, Child(fit_to_layout(child.genome, task), child.notes), "offline:revise"
        )

    def draft(self, task: TaskSpec, child: Child, origin: str) -> Draft:
        code = render(child.genome, task.obs_layout)
        reply = "offline designer: " + ("; ".join(child.notes) or "new design")
        return Draft(code=code, reply=reply, error=None, origin=origin)

    def rng(self, *parts: object) -> random.Random:
        """A generator seeded by the config seed and the call's inputs (stable across processes)."""
        digest = hashlib.sha256(json.dumps([self.seed, *parts], default=str).encode()).hexdigest()
        return random.Random(int(digest[:16], 16))

    def _child(
        self,
        task: TaskSpec,
        rng: random.Random,
        parents: list[tuple[Elite, Genome]],
        index: int,
        exploit: bool,
    ) -> Child:
        if not parents:
            if exploit and self.prior:
                return Child(prior_genome(task.n_agents), ("prior design",))
            return Child(random_genome(rng, task.n_agents), ("fresh sample",))
        if index > 0 and rng.random() < EXPLORE:
            return Child(random_genome(rng, task.n_agents), ("fresh sample (exploration)",))
        elite, genome = parents[0] if index == 0 else _pick(rng, parents)
        genome, notes = guided(genome, elite.reflection_stats, elite.metrics)
        notes = [f"from {elite.candidate_id}", *notes]
        if index > 0 and len(parents) > 1 and rng.random() < CROSSOVER:
            mate_elite, mate = _pick(rng, [p for p in parents if p[0] is not elite])
            genome = crossover(genome, mate, rng)
            notes.append(f"crossed with {mate_elite.candidate_id}")
        if not exploit or len(notes) == 1:
            for _ in range(rng.randint(1, 2)):
                genome, note = mutate(genome, rng, task.n_agents)
                notes.append(note)
        return Child(genome, tuple(notes))


class OfflineDebugger:
    """Targeted repair: drop the term/feature the traceback points at, else resample."""

    def __init__(self, designer: OfflineDesigner):
        self.designer = designer

    def repair(
        self, task: TaskSpec, code: str, error: str, history: list[tuple[str, str]]
    ) -> Draft:
        _check_task(task)
        tried = {code, *(earlier for earlier, _ in history)}
        genome = genome_of(code)
        if genome is not None:
            repaired, note = _without_culprit(
                genome, code, error, task.n_agents, prior=self.designer.prior
            )
            if repaired is not None:
                draft = self.designer.draft(
                    task, Child(fit_to_layout(repaired, task), (note,)), "offline:repair"
                )
                if draft.code not in tried:
                    return draft
        rng = self.designer.rng("repair", code, error, len(history))
        for _ in range(MAX_TRIES_PER_CHILD):
            child = Child(
                fit_to_layout(random_genome(rng, task.n_agents), task),
                ("fresh sample after a failure",),
            )
            draft = self.designer.draft(task, child, "offline:repair")
            if draft.code not in tried:
                return draft
        return Draft(
            code=None,
            reply="",
            error="offline debugger found no untried repair",
            origin="offline:repair",
        )


def fit_to_layout(genome: Genome, task: TaskSpec) -> Genome:
    """Keep only features whose observation slots the task's layout provides (at least one)."""
    usable = [f for f in genome.features if all(s in task.obs_layout for s in FEATURE_SLOTS[f])]
    return genome.with_features(usable or ["nearest_landmark"])


def _pick(rng: random.Random, parents: list[tuple[Elite, Genome]]) -> tuple[Elite, Genome]:
    """Rank-weighted choice: the best parent twice as likely as the second, and so on."""
    weights = [1.0 / (rank + 1) for rank in range(len(parents))]
    return rng.choices(parents, weights=weights, k=1)[0]


def _without_culprit(
    genome: Genome, code: str, error: str, n_agents: int, prior: bool = True
) -> tuple[Genome | None, str]:
    """The genome minus the gene the error points at (by traceback line, else by hook name)."""
    for line in reversed([int(n) for n in re.findall(r"line (\d+)", error)]):
        gene = gene_at_line(code, line)
        if gene is None:
            continue
        kind, name = gene.split(":")
        if kind == "feature":
            return genome.with_features(
                set(genome.features) - {name}
            ), f"dropped feature {name} (line {line} failed)"
        terms = [t for t in genome.terms if t.kind != name]
        if any(t.kind in TASK_TERMS for t in terms):
            return genome.with_terms(terms), f"dropped term {name} (line {line} failed)"
    if "enhance_observation" in error:
        return genome.with_features(
            {"nearest_landmark"}
        ), "reset features to nearest_landmark after an OEF failure"
    if "hybrid_reward" in error and prior:
        return genome.with_terms(
            prior_genome(n_agents).terms
        ), "reset reward terms to the prior after an HRF failure"
    return None, ""


def _check_task(task: TaskSpec) -> None:
    if task.env_name not in SUPPORTED_ENVS:
        raise ValueError(
            f"the offline designer supports {', '.join(SUPPORTED_ENVS)}, not {task.env_name!r}; use --llm openai:MODEL"
        )
    if "landmark_rel" not in task.obs_layout:
        raise ValueError(
            "the offline designer needs TaskSpec.obs_layout with a 'landmark_rel' slot"
        )
