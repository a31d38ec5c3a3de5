"""The offline designer and debugger: the LLM roles played by a program synthesiser.

Same interface as the LLM designer/debugger (its twin agents/designer.py), so the graph
cannot tell them apart.
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

from lero.agents.offline import generic
from lero.agents.offline.evolve import (
    Child,
    crossover,
    guided,
    mutate,
    prior_genome,
    random_genome,
)
from lero.agents.offline.generic import Vocabulary
from lero.agents.offline.generic_designer import GenericDesigner
from lero.agents.offline.genome import FEATURE_SLOTS, GENOME_TAG, TASK_TERMS, Genome, genome_of
from lero.agents.offline.render import gene_at_line, render
from lero.agents.offline.task_grammars import TASK_GRAMMARS
from lero.agents.offline.vocabulary import apply_edits, apply_once, parse_edits
from lero.agents.records import Draft, Elite, Problem, Review, exploit_parents

GRAMMARS = ("simple_spread",)  # task grammars of genome.py; task_grammars.py's build on the generic genome
CROSSOVER = 0.4  # chance that a further refinement of an elite also inherits from another
MAX_TRIES_PER_CHILD = 50
GENOME_TAGS = (GENOME_TAG, generic.GENOME_TAG)


class OfflineDesigner:
    """Writes K distinct candidates per call: exploit slots refine elites, explore slots sample.

    It remembers the designs it already proposed in this process and does not propose
    them again (after a resume the sandbox's result cache catches repeats instead).
    """

    def __init__(self, seed: int = 0, prior: bool = True):
        self.seed = seed
        self.prior = prior  # False: generation 0 is sampled, no hand-written head start
        self.proposed: set[Genome] = set()
        self.generic = GenericDesigner(self.rng, prior)

    def design(
        self,
        task: Problem,
        k: int,
        elites: list[Elite],
        reflection: str,
        feedback: str | None = None,
        exploit: int = 0,
    ) -> list[Draft]:
        """The first `exploit` drafts refine elites (rank order, round robin), the rest explore.

        The first refinement of an elite is its guided edits only; further ones add
        mutations (and sometimes crossover). Generation feedback is applied once per
        lineage (`vocabulary.apply_once`), never compounded.
        """
        if k < 1:
            raise ValueError(f"k must be >= 1, got {k}")
        if on_generic_genome(task):
            return self.generic.design(task, k, elites, feedback, exploit)
        _check_task(task)
        rng = self.rng("design", k, exploit, sorted(e.code for e in elites), feedback or "")
        ranked = sorted(elites, key=lambda e: e.fitness, reverse=True)
        parents = [(elite, g) for elite in ranked if (g := genome_of(elite.code)) is not None]
        refine = exploit_parents([elite for elite, _ in parents], min(exploit, k), len(parents))
        edits = parse_edits(feedback or "")
        seen = self.proposed | {genome for _, genome in parents}
        children: list[Child] = []
        for slot in range(k):
            elite = refine[slot] if slot < len(refine) else None
            for attempt in range(MAX_TRIES_PER_CHILD):
                if elite is None:
                    child = self._explore(rng, first=self.prior and not parents and slot == 0 and attempt == 0,
                                          sparse=task.task_spec.sparse)
                else:
                    child = self._exploit(rng, elite, parents, attempt)
                if edits:
                    genome, notes = apply_once(child.genome, edits)
                    child = Child(genome, (*child.notes, *notes), child.kind, child.parents)
                child = Child(fit_to_layout(child.genome, task), child.notes, child.kind, child.parents)
                if child.genome not in seen:
                    seen.add(child.genome)
                    children.append(child)
                    break
        self.proposed |= {child.genome for child in children}
        return [self.draft(task, child, "offline") for child in children]

    def revise(self, task: Problem, code: str, review: Review) -> Draft:
        """The edits the review's words ask for (the vocabulary in offline_grammar.md).

        Deterministic: the same comment on the same design gives the same module. When no
        word of the vocabulary matches, the design stays as it is and the reply says so.
        The generic grammar has no vocabulary: there the review gets one mutation.
        """
        if on_generic_genome(task):
            return self.generic.revise(task, code, review)
        _check_task(task)
        genome = genome_of(code)
        if genome is None:
            rng = self.rng("revise", code, review.text)
            child = Child(random_genome(rng), ("fresh sample: the reviewed code has no genome",))
            return self.draft(task, Child(fit_to_layout(child.genome, task), child.notes), "offline:revise")
        text = review.text if review.text.strip() else "\n".join(review.points)
        edited, notes = apply_edits(genome, parse_edits(text))
        if not notes:
            notes = ["no edit of the offline vocabulary matched the review; the design is unchanged"]
        child = Child(fit_to_layout(edited, task), tuple(f"revised: {note}" for note in notes))
        return self.draft(task, child, "offline:revise")

    def draft(self, task: Problem, child: Child, origin: str) -> Draft:
        code = render(child.genome, task)
        reply = "offline designer: " + ("; ".join(child.notes) or "new design")
        return Draft(code=code, reply=reply, error=None, origin=origin, kind=child.kind,  # type: ignore[arg-type]
                     parents=child.parents)

    def rng(self, *parts: object) -> random.Random:
        """A generator seeded by the config seed and the call's inputs (stable across processes)."""
        digest = hashlib.sha256(json.dumps([self.seed, *parts], default=str).encode()).hexdigest()
        return random.Random(int(digest[:16], 16))

    @staticmethod
    def _explore(rng: random.Random, first: bool, sparse: bool) -> Child:
        if first:
            return Child(prior_genome(sparse), ("prior design",))
        return Child(random_genome(rng), ("fresh sample",))

    @staticmethod
    def _exploit(
        rng: random.Random, elite: Elite, parents: list[tuple[Elite, Genome]], attempt: int
    ) -> Child:
        genome = next(g for e, g in parents if e is elite)
        genome, notes = guided(genome, elite.reflection_stats, elite.metrics)
        notes = [f"refines {elite.candidate_id}", *notes]
        sources = (elite.candidate_id,)
        if attempt > 0:  # the guided edits alone were taken: vary them
            mates = [p for p in parents if p[0] is not elite]
            if mates and rng.random() < CROSSOVER:
                mate_elite, mate = _pick(rng, mates)
                genome = crossover(genome, mate, rng)
                notes.append(f"crossed with {mate_elite.candidate_id}")
                sources = (elite.candidate_id, mate_elite.candidate_id)
            for _ in range(rng.randint(1, 2)):
                genome, note = mutate(genome, rng)
                notes.append(note)
        return Child(genome, tuple(notes), "exploit", sources)


class OfflineDebugger:
    """Targeted repair: drop the term/feature the traceback points at, else resample."""

    def __init__(self, designer: OfflineDesigner):
        self.designer = designer

    def repair(
        self, task: Problem, code: str, error: str, history: list[tuple[str, str]]
    ) -> Draft:
        if on_generic_genome(task):
            return self.designer.generic.repair(task, code, error, history)
        _check_task(task)
        tried = {code, *(earlier for earlier, _ in history)}
        genome = genome_of(code)
        if genome is not None:
            repaired, note = _without_culprit(genome, code, error, prior=self.designer.prior)
            if repaired is not None:
                draft = self.designer.draft(
                    task, Child(fit_to_layout(repaired, task), (note,)), "offline:repair"
                )
                if draft.code not in tried:
                    return draft
        rng = self.designer.rng("repair", code, error, len(history))
        for _ in range(MAX_TRIES_PER_CHILD):
            child = Child(
                fit_to_layout(random_genome(rng), task),
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


def fit_to_layout(genome: Genome, task: Problem) -> Genome:
    """Keep only features whose observation slots the task's layout provides (at least one)."""
    usable = [f for f in genome.features if all(s in task.obs_layout for s in FEATURE_SLOTS[f])]
    return genome.with_features(usable or ["nearest_landmark"])


def sampled_module(task: Problem, rng: random.Random) -> str:
    """A module rendered from a fresh draw of the task's grammar, from its `import` on: no
    docstring listing the genes, no genome line (an edit request's starting point: the
    module it returns is no longer the draw, and a small window has room for little more
    than the code). Greedy assignment: its helper is a few lines, the optimal one a page."""
    if on_generic_genome(task):
        vocab = Vocabulary.of(task)
        code = generic.render(generic.sample(rng, vocab), vocab)
    else:
        _check_task(task)
        code = render(fit_to_layout(random_genome(rng).with_assignment("greedy"), task), task)
    return code[code.index("import torch") :]


def without_genome(code: str) -> str:
    """`code` without the genome line a rendered module embeds (kept only on renderings)."""
    return "".join(line for line in code.splitlines(keepends=True) if not line.startswith(GENOME_TAGS))


def _pick(rng: random.Random, parents: list[tuple[Elite, Genome]]) -> tuple[Elite, Genome]:
    """Rank-weighted choice: the best parent twice as likely as the second, and so on."""
    weights = [1.0 / (rank + 1) for rank in range(len(parents))]
    return rng.choices(parents, weights=weights, k=1)[0]


def _without_culprit(genome: Genome, code: str, error: str, prior: bool = True) -> tuple[Genome | None, str]:
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
            prior_genome().terms
        ), "reset reward terms to the prior after an HRF failure"
    return None, ""


def on_generic_genome(task: Problem) -> bool:
    """Whether `task`'s designs are generic genomes (no grammar, or one of task_grammars.py)
    rather than genome.py's; ValueError for a grammar lero does not know."""
    grammar = task.task_spec.grammar
    if grammar is not None and grammar not in GRAMMARS and grammar not in TASK_GRAMMARS:
        known = ", ".join([*GRAMMARS, *TASK_GRAMMARS])
        raise ValueError(f"the offline designer has no grammar {grammar!r} (known: {known}, or None for the generic one)")
    return grammar is None or grammar in TASK_GRAMMARS


def _check_task(task: Problem) -> None:
    if "landmark_rel" not in task.obs_layout:
        raise ValueError(
            "the offline designer needs Problem.obs_layout with a 'landmark_rel' slot"
        )
