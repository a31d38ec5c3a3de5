"""Turn a candidate module's source into `Hooks` (runs LLM code: call only inside the sandbox)."""

from __future__ import annotations

import types

from lero.training.contract import CANDIDATE_FILE, OPTIONAL_FUNCTIONS, REQUIRED_FUNCTIONS
from lero.training.hooks import Hooks


def load_candidate(source: str) -> Hooks:
    """Exec `source` as a module named `candidate`; missing functions become `None`.

    Exceptions raised by the module body propagate unchanged so the sandbox
    can report them with the candidate's line numbers.
    """
    if not isinstance(source, str):
        raise ValueError(f"candidate source must be a str, got {type(source).__name__}")
    module = types.ModuleType("candidate")
    exec(compile(source, CANDIDATE_FILE, "exec"), module.__dict__)
    found = {}
    for name in (*REQUIRED_FUNCTIONS, *OPTIONAL_FUNCTIONS):
        fn = module.__dict__.get(name)
        if fn is not None and not callable(fn):
            raise ValueError(f"candidate defines {name} but it is not callable")
        found[name] = fn
    return Hooks(**found)
