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
from lero.agents.records import Draft, DraftKind, Elite, Problem, Review, exploit_parents

CROSSOVER = 0.4  # chance that a refinement of an elite also inherits from another
MAX_TRIES_PER_CHILD = 50


class GenericDesigner:
    """K distinct generic candidates per call: the prior first, then bred from the elites."""

    def __init__(self, rng: Callable[..., random.Random], prior: bool = True) -> None:
        self.rng = rng
        self.prior = prior  # False: generation 0 is sampled, no hand-written head start
        self.proposed: set[GenericGenome] = set()

    def design(
        self, task: Problem, k: int, elites: list[Elite], feedback: str | None, exploit: int = 0
    ) -> list[Draft]:
        """The first `exploit` drafts refine elites (rank order, round robin), the rest explore."""
        vocab = Vocabulary.of(task)
        rng = self.rng(
            "generic-design", task.env_name, k, exploit, sorted(e.code for e in elites), feedback or ""
        )
        ranked = sorted(elites, key=lambda e: e.fitness, reverse=True)
        parents = [(e, g) for e in ranked if (g := GenericGenome.of_code(e.code, vocab)) is not None]
        refine = exploit_parents([elite for elite, _ in parents], min(exploit, k), len(parents))
        seen = self.proposed | {g for _, g in parents}
        children: dict[GenericGenome, Draft] = {}
        for slot in range(k):
            elite = refine[slot] if slot < len(refine) else None
            for attempt in range(MAX_TRIES_PER_CHILD):
                if elite is None:
                    first = self.prior and not parents and slot == 0 and attempt == 0
                    genome, notes = (generic.prior(vocab), ["prior design"]) if first else (generic.sample(rng, vocab), ["fresh sample"])
                    kind: DraftKind = "explore"
                    sources: tuple[str, ...] = ()
                else:
                    genome, notes, sources = self._exploit(rng, vocab, elite, parents)
                    kind = "exploit"
                if genome not in seen:
                    seen.add(genome)
                    children[genome] = draft(genome, vocab, notes, "offline", kind, sources)
                    break
        self.proposed |= set(children)
        return list(children.values())

    @staticmethod
    def _exploit(
        rng: random.Random, vocab: Vocabulary, elite: Elite, parents: list[tuple[Elite, GenericGenome]]
    ) -> tuple[GenericGenome, list[str], tuple[str, ...]]:
        """The elite's guided edits, sometimes crossed with another elite, then one mutation."""
        genome = next(g for e, g in parents if e is elite)
        genome, notes = generic.guided(genome, elite.reflection_stats)
        notes = [f"refines {elite.candidate_id}", *notes]
        sources: tuple[str, ...] = (elite.candidate_id,)
        mates = [p for p in parents if p[0] is not elite]
        if mates and rng.random() < CROSSOVER:
            mate_elite, mate = rng.choice(mates)
            genome = generic.crossover(genome, mate, rng)
            notes.append(f"crossed with {mate_elite.candidate_id}")
            sources = (elite.candidate_id, mate_elite.candidate_id)
        genome, note = generic.mutate(genome, rng, vocab)
        return genome, [*notes, note], sources

    def revise(self, task: Problem, code: str, review: Review) -> Draft:
        """One mutation of the reviewed design (a fresh sample when the code is not ours)."""
        vocab = Vocabulary.of(task)
        rng = self.rng("generic-revise", code, review.text)
        genome = GenericGenome.of_code(code, vocab)
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
        self, task: Problem, code: str, error: str, history: list[tuple[str, str]]
    ) -> Draft:
        """Drop the gene the traceback points at, else an untried fresh sample."""
        vocab = Vocabulary.of(task)
        tried = {code, *(earlier for earlier, _ in history)}
        genome = GenericGenome.of_code(code, vocab)
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


def draft(
    genome: GenericGenome, vocab: Vocabulary, notes: list[str], origin: str,
    kind: DraftKind = "explore", parents: tuple[str, ...] = (),
) -> Draft:
    reply = "offline designer (generic grammar): " + ("; ".join(notes) or "new design")
    return Draft(code=generic.render(genome, vocab), reply=reply, error=None, origin=origin,
                 kind=kind, parents=parents)
