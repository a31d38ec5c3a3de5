"""lero's LLM layer: model access, designer, critic, debugger, assistant, offline designer."""

from agents.checks import check_candidate
from agents.config import LLMConfig
from agents.extract import extract_code
from agents.llm import BudgetExceeded, LLMError
from agents.team import Team, make_team
from agents.types import Draft, Elite, Review, TaskSpec

__all__ = [
    "BudgetExceeded",
    "Draft",
    "Elite",
    "LLMConfig",
    "LLMError",
    "Review",
    "TaskSpec",
    "Team",
    "check_candidate",
    "extract_code",
    "make_team",
]
