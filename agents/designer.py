"""The LLM designer: K candidate modules per call, and revisions after the critic's review."""

from __future__ import annotations

from langchain_core.messages import HumanMessage, SystemMessage
from lero.agents.extract import draft_from_reply
from lero.agents.llm import BudgetExceeded, ChatModel
from lero.agents.similarity import is_near_duplicate
from lero.agents.templates import format_elites, format_feedback, render
from lero.agents.types import Draft, Elite, Review, TaskSpec
from lero.training.contract import CONTRACT_TEXT

MAX_ELITES_IN_PROMPT = 2  # Markovian context: the best few, not the whole history
EXTRA_ROUNDS = 1  # how often to ask again for candidates lost as near-duplicates


class Designer:
    """Writes candidates from the task, the environment and the elites' reflection."""

    def __init__(self, model: ChatModel, temperature: float):
        self.model = model
        self.temperature = temperature

    def design(
        self,
        task: TaskSpec,
        k: int,
        elites: list[Elite],
        reflection: str,
        feedback: str | None = None,
    ) -> list[Draft]:
        """Up to `k` drafts; near-duplicates of each other or of an elite are dropped.

        When the budget runs out after some drafts came back, those drafts are returned;
        `BudgetExceeded` propagates only when there is nothing to show for the call.
        """
        if k < 1:
            raise ValueError(f"k must be >= 1, got {k}")
        known = [e.code for e in elites]
        messages = self._design_messages(task, elites, reflection, feedback, k)
        drafts: list[Draft] = []
        for _ in range(1 + EXTRA_ROUNDS):
            missing = k - len(drafts)
            if missing == 0:
                break
            try:
                replies = self.model.complete(
                    "designer", messages, n=missing, temperature=self.temperature
                )
            except BudgetExceeded:
                if drafts:
                    break
                raise
            for reply in replies:
                draft = draft_from_reply(reply, "designer")
                if draft.code is not None:
                    if is_near_duplicate(draft.code, known):
                        continue
                    known.append(draft.code)
                drafts.append(draft)
        return drafts

    def revise(self, task: TaskSpec, code: str, review: Review) -> Draft:
        """The candidate rewritten to address the critic's points."""
        user = render(
            "designer_revise",
            task=task.task,
            env_description=task.env_description,
            code=code.strip(),
            review=review.text.strip() or "\n".join(f"- {p}" for p in review.points),
        )
        messages = [
            SystemMessage(render("designer_system", contract=CONTRACT_TEXT)),
            HumanMessage(user),
        ]
        reply = self.model.complete("designer", messages, n=1, temperature=self.temperature)[0]
        return draft_from_reply(reply, "designer:revise")

    def _design_messages(
        self, task: TaskSpec, elites: list[Elite], reflection: str, feedback: str | None, k: int
    ) -> list:
        variation = (
            f"{k} candidates are sampled from this prompt; make yours a distinct idea, not a small variation of the elites."
            if k > 1
            else ""
        )
        user = render(
            "designer_user",
            task=task.task,
            algo=task.algo,
            n_agents=task.n_agents,
            obs_dim=task.obs_dim,
            env_description=task.env_description,
            evolution=format_elites(elites, reflection, MAX_ELITES_IN_PROMPT),
            feedback=format_feedback(feedback),
            variation=variation,
        )
        return [
            SystemMessage(render("designer_system", contract=CONTRACT_TEXT)),
            HumanMessage(user),
        ]
