"""How a GBNF grammar goes on the wire to each kind of OpenAI-compatible server.

Each server kind declares the body field it reads a grammar from; `ChatModel.grammar_form`
probes them in `GRAMMAR_FORMS` order once per model (a grammar only a constrained decoder
can follow: `PROBE_GRAMMAR`), and a server that follows none gets plain requests (its
replies are parsed and checked all the same):
- `grammar`: llama-cpp-python's server (a chat request's `grammar`, checked with 0.3.36)
  and llama.cpp's llama-server (`grammar` in its OpenAI-compatible chat body);
- `structured_outputs`: vLLM from 0.10 on (`{"structured_outputs": {"grammar": ...}}`; the
  older spelling was removed in 0.12);
- `guided_grammar`: vLLM before 0.12;
- Ollama (a JSON schema in `format` only) and OpenAI's own chat API take no grammar: `none`.
"""

from __future__ import annotations

import re
from typing import Any

GRAMMAR_FORMS = ("grammar", "structured_outputs", "guided_grammar", "none")
PROBE_GRAMMAR = 'root ::= "lero-" [0-9] [0-9]\n'
PROBE_REPLY = re.compile(r"lero-\d\d")
PROBE_PROMPT = "Say hello."


def grammar_body(form: str, grammar: str) -> dict[str, Any]:
    """The request body fields that carry `grammar` in `form` (empty: a plain request)."""
    if form == "grammar":
        return {"grammar": grammar}
    if form == "structured_outputs":
        return {"structured_outputs": {"grammar": grammar}}
    if form == "guided_grammar":
        return {"guided_grammar": grammar}
    return {}


def follows_probe_grammar(text: str) -> bool:
    """The probe's reply is a sentence of PROBE_GRAMMAR (no model writes that unconstrained)."""
    return PROBE_REPLY.fullmatch(text.strip()) is not None
