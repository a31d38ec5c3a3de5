"""The chat's dialogue loops around an `ExperimentDesk` (app.chat.desk): the offline guided
dialogue, which asks for each setting with a default, and the conversation with the
experiment assistant, whose tool calls act on the desk. Both chat front-ends (`lero chat`,
the web UI's chat page) run them on an `Asker`, so every path is testable end to end.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from rich.markup import escape

from lero.app.chat.desk import COMMAND_HELP, ExperimentDesk
from lero.app.console.approvals import Asker
from lero.graph.configuration import APPROVE_MODES, RunSpec
from lero.graph.trust import confirm_env

if TYPE_CHECKING:
    from lero.agents import LLMConfig
    from lero.agents.llm import ChatModel

STEP_ALIASES = {"k": 1_000, "m": 1_000_000}


def _parse_steps(text: str) -> int | None:
    text = text.strip().lower().replace("_", "").replace(",", "")
    scale = STEP_ALIASES.get(text[-1:], 1)
    digits = text[:-1] if scale > 1 else text
    try:
        value = int(float(digits) * scale)
    except (ValueError, OverflowError):
        return None
    return value if value > 0 else None


def _ask_steps(io: Asker, default: int) -> int:
    while (steps := _parse_steps(io.text("env steps per candidate", str(default)))) is None:
        io.say("[red]a positive number of steps, e.g. 300000 or 300k[/]")
    return steps


OTHER_ENV = "other"  # the guided dialogue's choice for a PettingZoo package.module:factory


def _ask_env(desk: ExperimentDesk) -> tuple[str, dict[str, Any]]:
    """The environment and its arguments: every LERO default the env states, asked in turn,
    then any other KEY=VALUE; the env is read once to check them (else: why, and again),
    where a run would read it (`graph.context.read_env`: in the sandbox for a custom env
    under Docker). A `package.module:factory` typed here is confirmed by that."""
    from lero.graph.context import read_env
    from lero.training.envs.registry import registered_envs

    io, spec = desk.io, desk.spec
    names = list(registered_envs())
    env, kwargs = spec.env, dict(spec.env_kwargs or {})  # the defaults offered: never a refused answer
    while True:
        chosen = io.choice("environment", [*names, OTHER_ENV], env if env in names else OTHER_ENV)
        if chosen == OTHER_ENV:
            chosen = io.text("PettingZoo env as package.module:factory", "" if env in names else env)
        offered = kwargs if chosen == env else RunSpec.default_env_kwargs(chosen)
        asked = {key: _ask_env_arg(io, key, value) for key, value in offered.items()}
        answer = {**asked, **_ask_other_env_args(io)}
        try:
            read_env(RunSpec.parse({**desk.fields, "env": chosen, "env_kwargs": answer}), confirm_env(chosen, chosen))
        except ValueError as error:
            io.say(f"[red]{escape(str(error).splitlines()[0])}[/] (asked again; the defaults are as before)")
            continue
        return chosen, answer


def env_arg_error(key: str, value: object, default: object) -> str | None:
    """Why VALUE cannot stand for env argument KEY whose LERO default is DEFAULT: it must be
    of the default's kind (None, full observability, is always allowed; the env checks the rest)."""
    kinds = {bool: "true or false", int: "a whole number", float: "a number"}
    wanted = type(default)
    if value is None or default is None or wanted not in kinds:
        return None
    fits = isinstance(value, bool) if wanted is bool else (
        isinstance(value, int | float) and not isinstance(value, bool) and (wanted is float or isinstance(value, int)))
    return None if fits else f"{key} takes {kinds[wanted]} (default {default}), got {value!r}"


def _ask_env_arg(io: Asker, key: str, default: object) -> object:
    """One env argument, asked again at once while its value is of the wrong kind."""
    from lero.app.cli.args import parse_value

    while (error := env_arg_error(key, value := parse_value(io.text(f"env argument {key}", str(default))),
                                  default)) is not None:
        io.say(f"[red]{escape(error)}[/]")
    return value


def _ask_other_env_args(io: Asker) -> dict[str, object]:
    """KEY=VALUE words, asked again at once while one is not of that form."""
    from lero.app.cli.args import parse_value

    while True:
        words = io.text("other env arguments, KEY=VALUE separated by spaces").split()
        bad = [word for word in words if not word.partition("=")[0] or not word.partition("=")[1]]
        if not bad:
            return {key: parse_value(value) for key, _, value in (word.partition("=") for word in words)}
        io.say(f"[red]expected KEY=VALUE, got {escape(' '.join(bad))}[/]")


def _checked(desk: ExperimentDesk, updates: dict[str, Any], name: str, ask: Callable[[], Any]) -> Any:
    """A field's answer, asked again at once while the spec refuses it (the reason shown at
    that field; the answers before it stand)."""
    while (error := desk.field_error({**updates, name: (value := ask())})) is not None:
        desk.io.say(f"[red]{escape(error)}[/]")
    return value


def guided_dialogue(desk: ExperimentDesk) -> bool:
    """Ask for each setting (Enter keeps the default) and show the cost estimate;
    False when the settings do not make a valid spec (the reason is shown)."""
    from lero.training import ALGOS

    io, spec = desk.io, desk.spec
    io.say("[bold]Experiment design[/] (Enter keeps the default)")
    env, env_kwargs = _ask_env(desk)
    updates: dict[str, Any] = {"env": env, "env_kwargs": env_kwargs}
    asked: dict[str, Callable[[], Any]] = {
        "algo": lambda: io.choice("algorithm", list(ALGOS), spec.algo),
        "generations": lambda: io.number("generations", spec.generations),
        "population": lambda: io.number("candidates per generation", spec.population),
        "steps": lambda: _ask_steps(io, spec.steps),
        "seeds": lambda: io.number("seeds per candidate", spec.seeds),
        "approve": lambda: io.choice("ask for approval of", list(APPROVE_MODES), spec.approve),
    }
    for name, ask in asked.items():
        updates[name] = _checked(desk, updates, name, ask)
    result = desk.typed_fields(updates)
    if result.startswith("not changed"):
        io.say(f"[red]{escape(result)}[/]")
        return False
    io.say(desk.estimate_cost(), markup=False)
    return True


def offline_chat(desk: ExperimentDesk) -> int:
    """The offline backend: guided dialogue, confirm, run; again until started or declined."""
    try:
        while True:
            if guided_dialogue(desk):
                desk.io.say(desk.start_run(), markup=False, soft_wrap=True)  # shows the spec, asks to confirm; paths unbroken
                if desk.last_run_id is not None:
                    return 0
            if not desk.io.confirm("Design it again?", default=True):
                desk.io.say("no experiment started")
                return 0
    except EOFError:
        desk.io.say("\ninput ended; no experiment started")
        return 0


# ---------------------------------------------------------------- the LLM assistant

MAX_TOOL_ROUNDS = 8  # tool calls answered per user message before the assistant must reply
QUIT_WORDS = ("/quit", "/exit", "quit", "exit")


def _next_message(io: Asker) -> str | None:
    try:
        return io.line("[bold cyan]you>[/] ")
    except EOFError:
        return None


def _filled_from_words(desk: ExperimentDesk, model: ChatModel, text: str) -> str | None:
    """The spec fields the person's words name, filled by the model through the spec's JSON
    schema (app.chat.spec_fill), shown and applied only when the person agrees; what happened
    (for the conversation), or None when the words name no field (the assistant answers)."""
    from lero.app.chat.spec_fill import described, propose

    proposal = propose(model, desk.spec, text)
    if not proposal:
        return None
    shown = described(proposal)
    desk.io.say(f"[bold green]assistant>[/] from your words: {escape(shown)}")
    if not desk.io.confirm("Apply these to the spec?", default=True):
        return f"(proposed {shown}; the person did not apply it)"
    answer = desk.set_fields(proposal)
    desk.io.say(answer, markup=False)
    return f"(set {shown}: {answer.splitlines()[0]})"


def assistant_chat(desk: ExperimentDesk, cfg: LLMConfig) -> int:
    """Conversation with the experiment assistant; its tool calls act on the desk."""
    from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

    from lero.agents import BudgetExceeded, LLMError, make_team
    from lero.agents.templates import render

    io = desk.io
    assistant = make_team(cfg).assistant
    tools = desk.tools()
    context = render("assistant_desk", tools=", ".join(desk.TOOL_NAMES), commands=COMMAND_HELP, spec=desk.show_spec())
    messages: list = [SystemMessage(render("assistant_system") + "\n" + context)]
    io.say(f"[bold]lero experiment assistant[/] ({escape(cfg.model)}); {escape(COMMAND_HELP)}")
    while (text := _next_message(io)) is not None and text not in QUIT_WORDS:
        if text.startswith("/"):
            answer = desk.command(text)
            io.say(answer, markup=False)
            messages.append(HumanMessage(f"(I typed {text}; it answered:)\n{answer}"))
            continue
        if not text:
            continue
        messages.append(HumanMessage(text))
        try:
            if (filled := _filled_from_words(desk, assistant.model, text)) is not None:
                messages.append(AIMessage(filled))
                continue
            for _ in range(MAX_TOOL_ROUNDS):
                reply = assistant.chat(messages, tools)
                messages.append(reply)
                for call in reply.tool_calls:
                    io.say(
                        f"[dim]tool {escape(call['name'])} {escape(json.dumps(call['args']))}[/]"
                    )
                    result = desk.call(call["name"], call["args"])
                    messages.append(ToolMessage(result, tool_call_id=call["id"]))
                if not reply.tool_calls:
                    break
            io.say(f"[bold green]assistant>[/] {escape(reply.text)}")
        except (LLMError, BudgetExceeded) as error:  # the chat goes on; the user may retry
            io.say(f"[red]assistant unavailable:[/] {escape(str(error))}")
    return 0
