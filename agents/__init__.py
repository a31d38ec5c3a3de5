"""lero's LLM layer: model access, designer, critic, debugger, assistant, offline designer.

The public names below load their module on first access (`training.lazy`), so importing a
light module of this package (``lero.agents.llm_config``, which the command line's grammar
reads) imports neither torch nor langchain.
"""

from lero.training.lazy import lazy_exports

_HOMES = {  # module -> the public names that live there
    "lero.agents.budget": ("BudgetExceeded",),
    "lero.agents.checks": ("check_candidate",),
    "lero.agents.extract": ("extract_code",),
    "lero.agents.llm_config": ("LLMConfig",),
    "lero.agents.records": ("Draft", "Elite", "Problem", "Review"),
    "lero.agents.retry": ("LLMError",),
    "lero.agents.team": ("Team", "make_team"),
}

__getattr__, __dir__, __all__ = lazy_exports(globals(), _HOMES)
