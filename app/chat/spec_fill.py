"""The chat's draft spec filled from a person's plain words by schema-constrained output.

The spec's fields go to the model as a JSON Schema, sent the way structured design sends
the genome's (`agents.llm.ChatModel.replies(schema=...)`, in the form the server takes), and
the reply is read and checked the same way (`agents.structured.parse_object`,
`agents.offline.schema.schema_errors`). Every field is required and may be null, in a fixed
order, so that even a 135M-parameter model walks through each one (SmolLM2 given optional
fields copies its example instead). What comes back is a *proposal*: a value the words do not
contain (a number not written there, an algorithm or env not named) is dropped, as are the
values the spec already has; the chat shows the rest and applies it only when the person
agrees (`app.chat.dialogues`).
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Any

from lero.agents.offline.schema import schema_errors
from lero.agents.structured import parse_object
from lero.agents.templates import render
from lero.graph.configuration import APPROVE_MODES, RunSpec

if TYPE_CHECKING:
    from lero.agents.llm import ChatModel

NUMBER_FIELDS = ("steps", "generations", "population", "seeds")
SUFFIXED = re.compile(r"\b(\d+(?:\.\d+)?)\s*([kKmM])\b")  # 200k, 1.5M
SCALE = {"k": 1_000, "m": 1_000_000}
EXAMPLE = " => "  # agents/prompts/assistant_fill_examples.md: `WORDS => JSON` a line


def written_out(words: str) -> str:
    """WORDS with 200k / 1.5M written as whole numbers (the model copies digits; it does not scale)."""
    return SUFFIXED.sub(lambda m: str(int(float(m[1]) * SCALE[m[2].lower()])), words)


def env_arguments(spec: RunSpec) -> dict[str, Any]:
    """The spec env's numeric and boolean arguments (its LERO defaults' keys), the ones words can set."""
    return {key: value for key, value in spec.env_kwargs.items() if isinstance(value, int | float)}


def field_schemas(spec: RunSpec) -> dict[str, dict[str, Any]]:
    """Each field a sentence may set, in the order asked: the algorithm and env by their
    registries' names, the env's arguments by their values' kinds, RunSpec's own types for
    the budgets and its approval modes."""
    from lero.training import ALGOS
    from lero.training.envs.registry import registered_envs

    fields = RunSpec.model_json_schema()["properties"]
    kind = {bool: "boolean", int: "integer", float: "number"}
    return {
        "algo": {"enum": list(ALGOS)},
        "env": {"enum": list(registered_envs())},
        **{key: {"type": kind[type(value)]} for key, value in env_arguments(spec).items()},
        **{name: {"type": fields[name]["type"]} for name in NUMBER_FIELDS},
        "approve": {"enum": fields["approve"]["enum"]},
    }


def spec_schema(spec: RunSpec) -> dict[str, Any]:
    """What the server constrains the reply to: every field required and nullable."""
    nullable = {name: {"enum": [*field["enum"], None]} if "enum" in field else {"type": [field["type"], "null"]}
                for name, field in field_schemas(spec).items()}
    return {"type": "object", "properties": nullable, "required": list(nullable), "additionalProperties": False}


def fill_messages(spec: RunSpec, schema: dict[str, Any], words: str) -> list:
    """The request: the instructions (agents/prompts/assistant_fill.md), the worked examples
    as earlier turns (each reply with every field, as the schema asks), then the words."""
    from langchain_core.messages import AIMessage, HumanMessage, SystemMessage

    from lero.training import ALGOS
    from lero.training.envs.registry import registered_envs

    arguments = env_arguments(spec)
    described = (f"{', '.join(arguments)}: arguments of {spec.env} (now "
                 f"{', '.join(f'{k}={v}' for k, v in arguments.items())})") if arguments else "no env arguments"
    messages: list = [SystemMessage(render("assistant_fill", algos=", ".join(ALGOS), envs=", ".join(registered_envs()),
                                           env_args=described, approve=", ".join(APPROVE_MODES)))]
    for line in render("assistant_fill_examples").splitlines():
        example, _, reply = line.partition(EXAMPLE)
        named = json.loads(reply)
        messages += [HumanMessage(example), AIMessage(json.dumps({key: named.get(key) for key in schema["properties"]}))]
    return [*messages, HumanMessage(written_out(words))]


def proposed_fields(reply: str, words: str, spec: RunSpec) -> dict[str, Any]:
    """The spec updates a reply proposes (RunSpec names; env arguments under `env_kwargs`):
    its non-null values that the words contain and the spec does not already have. A reply
    that is not an object of the schema proposes nothing."""
    body = parse_object(reply)
    given = {key: value for key, value in (body or {}).items() if value is not None}
    if body is None or schema_errors(given, {"type": "object", "properties": field_schemas(spec), "additionalProperties": False}):
        return {}
    said = written_out(words).lower()
    numbers = {float(n) for n in re.findall(r"\d+(?:\.\d+)?", said)}
    named = set(re.findall(r"[a-z0-9_:.]+", said))
    current = {**spec.model_dump(), **spec.env_kwargs}
    kept = {key: value for key, value in given.items()
            if value != current.get(key)
            and (value in numbers if isinstance(value, int | float) and not isinstance(value, bool) else
                 isinstance(value, str) and value.lower() in named)}  # fmt: skip
    arguments = {key: kept.pop(key) for key in list(kept) if key in env_arguments(spec)}
    return {**kept, "env_kwargs": arguments} if arguments else kept


def described(proposal: dict[str, Any]) -> str:
    """`N=4, algo=vdn, steps=200000`: a proposal as the person reads it."""
    flat = {**proposal.get("env_kwargs", {}), **{k: v for k, v in proposal.items() if k != "env_kwargs"}}
    return ", ".join(f"{key}={value}" for key, value in flat.items())


def propose(model: ChatModel, spec: RunSpec, words: str) -> dict[str, Any]:
    """Ask MODEL to fill the spec from WORDS; the proposal (`proposed_fields`). LLMError,
    BudgetExceeded: the model could not be asked."""
    schema = spec_schema(spec)
    [reply] = model.replies("assistant", fill_messages(spec, schema, words), n=1, temperature=0.0, schema=schema)
    return proposed_fields(reply.text, words, spec)
