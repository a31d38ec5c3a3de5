"""lero's LLM layer: model access, designer, critic, debugger, assistant, offline designer."""

from lero.agents.budget import BudgetExceeded
from lero.agents.checks import check_candidate
from lero.agents.extract import extract_code
from lero.agents.llm_config import LLMConfig
from lero.agents.records import Draft, Elite, Problem, Review
from lero.agents.retry import LLMError
from lero.agents.team import Team, make_team

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
