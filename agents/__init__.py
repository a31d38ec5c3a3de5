"""lero's LLM layer: model access, designer, critic, debugger, assistant, offline designer."""

from lero.agents.budget import BudgetExceeded
from lero.agents.checks import check_candidate
from lero.agents.config import LLMConfig
from lero.agents.extract import extract_code
from lero.agents.retry import LLMError
from lero.agents.team import Team, make_team
from lero.agents.types import Draft, Elite, Problem, Review

__all__ = [
    "BudgetExceeded",
    "Draft",
    "Elite",
    "LLMConfig",
    "LLMError",
    "Problem",
    "Review",
    "Team",
    "check_candidate",
    "extract_code",
    "make_team",
]
