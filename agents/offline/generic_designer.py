"""The offline designer and debugger over the generic grammar (`generic.py`).

Same calls as `OfflineDesigner` / `OfflineDebugger`, which hand a task over to this one
when the environment names no grammar of its own. Deterministic like them: the random
generator comes from the designer's seed and the call's inputs.
"""

from __future__ import annotations

import random
from collections.abc import Callable

from lero.agents.offline import generic
from lero.agents.offline.generic import GenericGenome, Vocabulary
from lero.agents.types import Draft, Elite, Review, TaskSpec

EXPLORE = 0.15  # share of later-generation children sampled fresh instead of bred
CROSSOVER = 0.4
MAX_TRIES_PER_CHILD = 50


class GenericDesigner:
    """K distinct generic candidates per call: the prior first, then bred from the elites."""

    def __init__(self, rng: Callable[..., random.Random]) -> None:
        self.rng = rng
        self.proposed: set[GenericGenome] = set()

    def design(
        self, task: TaskSpec, k: int, elites: list[Elite], feedback: str | None
    ) -> list[Draft]:
        vocab = Vocabulary.of(task)
        rng = self.rng(
            "generic-design", task.env_name, k, sorted(e.code for e in elites), feedback or ""
        )
        ranked = sorted(elites, key=lambda e: e.fitness, reverse=True)
        parents = [(e, g) for e in ranked if (g := GenericGenome.of_code(e.code)) is not None]
        seen = self.proposed | {g for _, g in parents}
        children: list[tuple[GenericGenome, list[str]]] = []
        for attempt in range(k * MAX_TRIES_PER_CHILD):
            if len(children) == k:
                break
            genome, notes = self._child(rng, vocab, parents, first=attempt == 0)
            if genome not in seen:
                seen.add(genome)
                children.append((genome, notes))
        self.proposed |= {genome for genome, _ in children}
        return [draft(genome, vocab, notes, "offline") for genome, notes in children]

    def _child(
        self,
        rng: random.Random,
        vocab: Vocabulary,
        parents: list[tuple[Elite, GenericGenome]],
        first: bool,
    ) -> tuple[GenericGenome, list[str]]:
        if not parents:
            if first:
                return generic.prior(vocab), ["prior design"]
            return generic.sample(rng, vocab), ["fresh sample"]
        if not first and rng.random() < EXPLORE:
            return generic.sample(rng, vocab), ["fresh sample (exploration)"]
        elite, genome = parents[0] if first else rng.choice(parents)
        genome, notes = generic.guided(genome, elite.reflection_stats)
        notes = [f"from {elite.candidate_id}", *notes]
        if len(parents) > 1 and rng.random() < CROSSOVER:
            mate_elite, mate = rng.choice([p for p in parents if p[0] is not elite])
            genome = generic.crossover(genome, mate, rng)
            notes.append(f"crossed with {mate_elite.candidate_id}")
        genome, note = generic.mutate(genome, rng, vocab)
        return genome, [*notes, note]

    def revise(self, task: TaskSpec, code: str, review: Review) -> Draft:
        """One mutation of the reviewed design (a fresh sample when the code is not ours)."""
        vocab = Vocabulary.of(task)
        rng = self.rng("generic-revise", code, review.text)
        genome = GenericGenome.of_code(code)
        if genome is None:
            return draft(
                generic.sample(rng, vocab),
                vocab,
                ["fresh sample: the reviewed code has no genome"],
                "offline:revise",
            )
        mutated, note = generic.mutate(genome, rng, vocab)
        return draft(mutated, vocab, [f"revised after review: {note}"], "offline:revise")

    def repair(
        self, task: TaskSpec, code: str, error: str, history: list[tuple[str, str]]
    ) -> Draft:
        """Drop the gene the traceback points at, else an untried fresh sample."""
        vocab = Vocabulary.of(task)
        tried = {code, *(earlier for earlier, _ in history)}
        genome = GenericGenome.of_code(code)
        if genome is not None:
            repaired, note = generic.without_culprit(genome, code, error)
            if repaired is not None:
                fixed = draft(repaired, vocab, [note], "offline:repair")
                if fixed.code not in tried:
                    return fixed
        rng = self.rng("generic-repair", code, error, len(history))
        for _ in range(MAX_TRIES_PER_CHILD):
            fresh = draft(
                generic.sample(rng, vocab),
                vocab,
                ["fresh sample after a failure"],
                "offline:repair",
            )
            if fresh.code not in tried:
                return fresh
        return Draft(
            code=None,
            reply="",
            error="offline debugger found no untried repair",
            origin="offline:repair",
        )


def draft(genome: GenericGenome, vocab: Vocabulary, notes: list[str], origin: str) -> Draft:
    reply = "offline designer (generic grammar): " + ("; ".join(notes) or "new design")
    return Draft(code=generic.render(genome, vocab), reply=reply, error=None, origin=origin)
