"""The model layer's request loop: one ChatOpenAI client, one retry policy, per-role
accounting, one budget. Each concern it draws on has its own module: the budget ledger
(agents.budget), which failures are retried (agents.retry), fitting prompts into the window
(agents.fit), what a server says about itself (agents.probe), replies and their byte cap
(agents.replies) and sampling seeds (agents.sampling).

Retries happen only here (tenacity); the openai client's own retries are off so a
request is never retried by two layers. Transient failures (429, 5xx, dropped
connections) back off exponentially with jitter, honouring `Retry-After`; permanent
ones (400, 401, 403, 404, ...) raise `LLMError` at once.

A timed-out request is different: a single-slot local server (llama.cpp on a CPU) goes on
computing the abandoned reply, so sending it again only queues a second copy behind the
first. It is sent again only when the server can say it is idle again (llama-server's
`/slots`), after waiting for that; a server that cannot say gets no second copy, and the
run stops with a line naming `--llm-timeout`.

Real servers differ, and each difference is handled here once: `n` ignored or refused,
no `usage` (tokens estimated and marked so), a chat template that refuses a system role
(the system text goes into the first user turn), a reply cut off at `max_tokens` (asked
once to continue), a window stated only in a refusal of a prompt too long for it (learned
there; a prompt `fit` made is fitted again and sent once more), a refused `seed` (left out
from then on).

Every request carries a sampling `seed` drawn from the run's `--designer-seed`, the role,
the prompt and how often that prompt was sent before (`sampling_seed`): a run repeated
with the same seed asks a seeded server (llama.cpp, vLLM, ...) for the same replies, and a
prompt sent twice still gets two draws. Every request is reported
through `on_call` with its prompt, replies, tokens, seconds and finish reasons, and the
candidate it was about (`about`).
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from tenacity import RetryCallState, Retrying, retry_if_exception, stop_after_attempt
from tenacity.wait import wait_random_exponential

from lero.agents.budget import UsageLedger
from lero.agents.fit import (
    CHARS_PER_TOKEN,
    MESSAGE_OVERHEAD_TOKENS,
    MIN_REPLY_TOKENS,
    Fitted,
    PromptOutgrown,
    PromptTooLarge,
    estimate_tokens,
    fit,
    fit_conversation,
    messages_tokens,
    reply_room,
)
from lero.agents.grammar_form import (
    GRAMMAR_FORMS,
    PROBE_GRAMMAR,
    PROBE_PROMPT,
    follows_probe_grammar,
    grammar_body,
)
from lero.agents.llm_config import LLMConfig
from lero.agents.probe import (
    PROBE_MESSAGES,
    PROBE_SCHEMA,
    PROBE_TOKENS,
    REFUSAL_SOURCE,
    STRUCTURED_FORMS,
    Window,
    context_window,
    count_tokens,
    keeps_probe_schema,
    response_format,
    server_busy,
    stated_window,
)
from lero.agents.records import PROBE_ROLE
from lero.agents.replies import Reply, cut_replies, message_text, reply_limit
from lero.agents.retry import (
    LLMError,
    describe_error,
    is_timeout,
    is_transient,
    openai_module,
    rejects_seed,
    rejects_system_role,
    retry_after_s,
)
from lero.agents.sampling import prompt_digest, prompt_key, sampling_seed

log = logging.getLogger(__name__)

OnCall = Callable[[str, dict], None]


CALIBRATION_MARGIN = 0.9
CALIBRATION_MIN_TOKENS = 200  # prompts shorter than this do not calibrate characters per token
CONTINUE = "Your reply was cut off. Continue it exactly where it stopped, without repeating anything."
_subject: contextvars.ContextVar[str | None] = contextvars.ContextVar("lero_llm_subject", default=None)


@contextlib.contextmanager
def about(candidate_id: str | None) -> Iterator[None]:
    """Requests made inside this block are recorded as being about `candidate_id`."""
    token = _subject.set(candidate_id)
    try:
        yield
    finally:
        _subject.reset(token)


class ChatModel:
    """Sends chat requests for every role through one client, one retry policy and one ledger."""

    def __init__(
        self,
        cfg: LLMConfig,
        ledger: UsageLedger,
        on_call: OnCall | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ):
        if cfg.backend != "openai":
            raise ValueError("ChatModel needs backend='openai'")
        self.cfg = cfg
        self.ledger = ledger
        self.on_call = on_call
        self.sleep = sleep  # waits for an idle server; tests pass their own clock
        self.supports_n = True
        self.supports_tools = True
        self.system_role = True
        self.sends_seed = True
        self._sends: Counter[str] = Counter()  # role + prompt digest -> requests sent with it
        self._sends_lock = threading.Lock()
        self._window: Window | None = None
        self._structured_form: str | None = None  # probed on the first request with a schema
        self._grammar_form: str | None = None  # probed on the first request with a grammar
        self.chars_per_token = CHARS_PER_TOKEN  # measured from the server's usage once it counts
        self._measured: float | None = None
        self._tokenizer_asked = False  # the server's tokenizer is asked once, before the first fit
        self._fitted_from: dict[tuple, tuple] = {}  # recent prompts -> (window, fit's arguments, reply room)
        self._fits_lock = threading.Lock()
        self._api_key = cfg.api_key.get_secret_value() if cfg.api_key else None
        # imported here: what never asks a model (an offline run, the UI's workers) never pays its second
        from langchain_openai import ChatOpenAI

        self.client = ChatOpenAI(
            model=cfg.model,
            base_url=cfg.base_url,
            api_key=cfg.api_key,
            timeout=cfg.timeout_s,
            max_retries=0,
            temperature=cfg.temperature,
        )

    # -- the context window and the prompts that fit it

    def window(self) -> Window:
        """The model's context window, asked of the server once."""
        if self._window is None:
            self._window = context_window(self.cfg.base_url, self.cfg.model, self.cfg.context_tokens, self._api_key)
            log.info("context window %d tokens (%s)", self._window.tokens, self._window.source)
        return self._window

    def reply_tokens(self) -> int:
        """`max_tokens` of each reply: the setting, at most a quarter of the window."""
        return reply_room(self.window().tokens, self.cfg.reply_tokens)

    def reply_room_for(self, messages: Sequence[BaseMessage]) -> int:
        """`max_tokens` of a reply to MESSAGES: `reply_tokens`, or less where `fit` made the
        prompt take room from its reply (what a grammar sized to the reply must fit)."""
        remembered = self._fitted_for(messages)
        return self.reply_tokens() if remembered is None else remembered[2]

    def fit(self, role: str, system: str, template: str, values: dict[str, object]) -> Fitted:
        """The role's messages, shortened in the stated priority to leave the reply its room
        (`reply_tokens`); a prompt that does not fit even shortened takes room from its reply,
        down to MIN_REPLY_TOKENS (its request's max_tokens then says so). PromptTooLarge when
        even that is too little for the parts that cannot be shortened (the contract, the code
        under review): a failure of this one request, not of the run."""
        if not self._tokenizer_asked:
            self._count_with_server(fit(role, system, template, values, None).messages)
        window = self.window().tokens
        try:
            fitted = fit(role, system, template, values, window - self.reply_tokens(), self.chars_per_token)
        except PromptTooLarge as error:  # as short as it gets: the reply gives up room, down to its floor
            if error.fitted is None or error.fitted.prompt_tokens > window - MIN_REPLY_TOKENS:
                raise
            fitted = error.fitted
            log.info("the %s prompt leaves its reply %d tokens", role, window - fitted.prompt_tokens)
        with self._fits_lock:
            self._fitted_from[prompt_key(fitted.messages)] = (window, (role, system, template, values),
                                                              min(self.reply_tokens(), window - fitted.prompt_tokens))  # fmt: skip
            while len(self._fitted_from) > REMEMBERED_FITS:
                del self._fitted_from[next(iter(self._fitted_from))]
        return fitted

    def _learn_window(self, error: LLMError) -> None:
        """A refusal that states a window smaller than the one assumed (llama-cpp-python's
        server states it only then): that window from now on."""
        refusal = error.__cause__
        if not isinstance(refusal, openai_module().BadRequestError):
            return
        tokens = stated_window(str(refusal.message))
        if tokens is not None and tokens < self.window().tokens:
            log.warning("the server refused a prompt too long for its %d-token window; fitting to it from now on", tokens)
            self._window = Window(tokens, REFUSAL_SOURCE)

    def _fitted_for(self, messages: Sequence[BaseMessage]) -> tuple | None:
        """(window, fit's arguments, reply room) of a prompt `fit` made recently, else None."""
        with self._fits_lock:
            return self._fitted_from.get(prompt_key(messages))

    def _fit_again(self, messages: Sequence[BaseMessage], shortened: Sequence[str]) -> tuple[Sequence[BaseMessage], Sequence[str]]:
        """A prompt `fit` made for a larger window than the one a refusal has since stated,
        fitted again (callers keep their prompt for later rounds); any other, as it is.
        A prompt that cannot fit is `PromptOutgrown`, a PromptTooLarge, so the role's own
        answer to a prompt too large (a smaller prompt, the gate alone, a failed draft)
        meets it, not the end of the run's LLM work."""
        remembered = self._fitted_for(messages)
        if remembered is None or remembered[0] <= self.window().tokens:
            return messages, shortened
        try:
            again = self.fit(*remembered[1])
        except PromptTooLarge as error:
            raise PromptOutgrown(str(error)) from None
        return again.messages, again.shortened

    def _count_with_server(self, messages: Sequence[BaseMessage]) -> None:
        """Characters per token from the server's tokenizer on the first prompt, before it is
        sent: on a small window the 3.2 estimate leaves an edit request no room for its
        starting module until a reply's usage has counted a prompt. No tokenizer route: the
        estimate, then the usage, as before."""
        self._tokenizer_asked = True
        text = "".join(message_text(m) for m in messages)
        counted = count_tokens(self.cfg.base_url, self.cfg.model, text, self._api_key)
        if counted is not None:
            log.info("the server's tokenizer counts %d tokens in %d characters", counted, len(text))
            self._measure(len(text), counted)

    # -- requests

    def replies(
        self,
        role: str,
        messages: Sequence[BaseMessage],
        n: int = 1,
        temperature: float | None = None,
        shortened: Sequence[str] = (),
        schema: dict[str, Any] | None = None,
        grammar: str | None = None,
    ) -> list[Reply]:
        """`n` replies; asks for `n` choices at once, else one request per reply. A reply cut
        off at `max_tokens` is asked once to continue; still cut off, it stays `cut_off`.
        PromptOutgrown: a refusal stated a smaller window and `messages` (made by `fit`) no
        longer fit it even shortened.

        With a JSON `schema`, it goes to the server in the form the server takes
        (`structured_form`, probed once); the reply is text either way, and the caller
        checks it against the schema (a server may ignore it). A cut-off JSON reply is not
        continued: a continuation would start a new object. A GBNF `grammar` goes the same
        way (`grammar_form`), and its cut-off replies are not continued either."""
        if n < 1:
            raise ValueError(f"n must be >= 1, got {n}")
        params: dict[str, Any] = {} if temperature is None else {"temperature": temperature}
        if schema is not None and (form := response_format(self.structured_form(), schema)) is not None:
            params["response_format"] = form
        if grammar is not None and (body := grammar_body(self.grammar_form(), grammar)):
            params["grammar_body"] = body
        replies: list[Reply] = []
        resent = False
        while len(replies) < n:
            want = n - len(replies) if self.supports_n else 1
            messages, shortened = self._fit_again(messages, shortened)
            assumed = self.window().tokens
            try:
                generated = self._request(role, messages, n=want, shortened=shortened, **params)
            except LLMError as error:
                if not resent and self.window().tokens < assumed and self._fitted_for(messages):
                    resent = True  # fitted again to the window the refusal stated, at the loop's top
                    continue
                if want > 1 and isinstance(error.__cause__, openai_module().BadRequestError):
                    log.info("server refused n=%d choices; asking one reply per request", want)
                    self.supports_n = False
                    continue
                raise
            if want > 1 and len(generated) < want:
                self.supports_n = False
            replies.extend(generated[: n - len(replies)])
        if schema is not None or grammar is not None:
            return replies
        return [self._continued(role, messages, reply, params) if reply.cut_off else reply for reply in replies]

    def structured_form(self) -> str:
        """How this server takes a JSON Schema (`STRUCTURED_FORMS`), asked once per model:
        the first form it answers with JSON that keeps a small probe schema, else `none`
        (plain requests; replies are still parsed and checked). A form the server refuses
        (llama-cpp-python 0.3.36 answers `json_schema` with HTTP 500) is not retried."""
        if self._structured_form is None:
            self._structured_form = self._probe("structured output", STRUCTURED_FORMS, PROBE_MESSAGES, keeps_probe_schema,
                                                lambda form: {"response_format": response_format(form, PROBE_SCHEMA)})
        return self._structured_form

    def grammar_form(self) -> str:
        """How this server takes a GBNF grammar (`agents.grammar_form.GRAMMAR_FORMS`), asked
        once per model: the first form whose reply follows a probe grammar, else `none`."""
        if self._grammar_form is None:
            self._grammar_form = self._probe("a grammar", GRAMMAR_FORMS, [HumanMessage(PROBE_PROMPT)],
                                             follows_probe_grammar,
                                             lambda form: {"grammar_body": grammar_body(form, PROBE_GRAMMAR)})
        return self._grammar_form

    def _probe(self, what: str, forms: Sequence[str], messages: Sequence[BaseMessage], kept: Callable[[str], bool],
               fields: Callable[[str], dict[str, Any]]) -> str:
        """The first of `forms` (but the last, which is `none`) whose probe reply is `kept`;
        a form the server refuses is not retried."""
        for form in forms[:-1]:
            try:
                [reply] = self._request(PROBE_ROLE, messages, n=1, retries=0, temperature=0.0,
                                        max_tokens=PROBE_TOKENS, **fields(form))
            except LLMError as error:
                log.info("the server refused %s as %s: %s", what, form, error)
                continue
            if kept(reply.text):
                log.info("%s: %s", what, form)
                return form
        log.info("%s: %s", what, forms[-1])
        return forms[-1]

    def _continued(self, role: str, messages: Sequence[BaseMessage], cut: Reply, params: dict) -> Reply:
        """`cut` and one continuation of it, when the window has room for more reply."""
        follow_up = [*messages, AIMessage(cut.text), HumanMessage(CONTINUE)]
        if cut.used_tokens:  # the server counted prompt and reply: only the request to continue is new
            needed = cut.used_tokens + messages_tokens([HumanMessage(CONTINUE)], self.chars_per_token) + MESSAGE_OVERHEAD_TOKENS
        else:
            needed = messages_tokens(follow_up, self.chars_per_token)
        room = self.window().tokens - needed
        if room < MIN_REPLY_TOKENS:
            log.info("%s reply cut off at max_tokens; no room in the window to continue it", role)
            return cut
        more = self._request(role, follow_up, n=1, max_tokens=min(room, self.reply_tokens()), **params)[0]
        return Reply(cut.text + more.text, more.finish_reason)

    def chat(
        self, role: str, messages: Sequence[BaseMessage], tools: Sequence[Any] = ()
    ) -> AIMessage:
        """One reply, with tool calls where the server supports them, else plain text. The
        conversation's oldest turns are left out to fit the window (`fit_conversation`; the
        tool list is not counted: servers without tool calling leave it out of the prompt)."""
        try:
            fitted = fit_conversation(role, messages, self.window().tokens - self.reply_tokens(), self.chars_per_token)
        except PromptTooLarge as error:
            raise LLMError(str(error)) from None
        if tools and self.supports_tools:
            try:
                return self._send_and_record(role, fitted.messages, n=1, tools=tools, shortened=fitted.shortened)[0]
            except LLMError as error:
                if not isinstance(error.__cause__, openai_module().BadRequestError):
                    raise
                log.info("server refused tool calling; the assistant answers in plain text")
                self.supports_tools = False
        return self._send_and_record(role, fitted.messages, n=1, shortened=fitted.shortened)[0]

    def _request(self, role: str, messages: Sequence[BaseMessage], n: int, **params: Any) -> list[Reply]:
        generated = self._send_and_record(role, messages, n, **params)
        usage = generated[0].usage_metadata or {}
        counted = usage.get("input_tokens", 0) + usage.get("output_tokens", 0)  # all choices: an upper bound
        return [
            Reply(message_text(message), (message.response_metadata or {}).get("finish_reason"), counted or None)
            for message in generated
        ]

    def _send_and_record(
        self,
        role: str,
        messages: Sequence[BaseMessage],
        n: int,
        tools: Sequence[Any] = (),
        shortened: Sequence[str] = (),
        retries: int | None = None,
        **params: Any,
    ) -> list[AIMessage]:
        """One logical request (retried as the policy says, or `retries` times), recorded
        whatever its outcome."""
        self.ledger.check_budget()
        params.setdefault("max_tokens", self.reply_room_for(messages))
        if self.sends_seed:
            params.setdefault("seed", self._next_seed(role, messages))
        retries = self.cfg.max_retries if retries is None else retries
        while True:  # each refusal below is learnt once, so this resends at most twice
            try:
                return self._send_once_per_template(role, messages, n, tools, shortened, params, retries)
            except LLMError as error:
                refusal = error.__cause__
                if self.system_role and isinstance(refusal, Exception) and rejects_system_role(refusal):
                    log.info("the server's chat template refuses a system role; sending it as a user turn")
                    self.system_role = False
                elif "seed" in params and rejects_seed(refusal):
                    log.info("the server refuses a sampling seed; requests go without one")
                    self.sends_seed = False
                    del params["seed"]
                else:
                    self._learn_window(error)
                    raise

    def _next_seed(self, role: str, messages: Sequence[BaseMessage]) -> int:
        """`sampling_seed` for this send of the prompt (the count is kept per role and prompt)."""
        digest = prompt_digest(role, messages)
        with self._sends_lock:
            sent_before = self._sends[digest]
            self._sends[digest] += 1
        return sampling_seed(self.cfg.seed, digest, sent_before)

    def _send_once_per_template(
        self,
        role: str,
        messages: Sequence[BaseMessage],
        n: int,
        tools: Sequence[Any],
        shortened: Sequence[str],
        params: dict[str, Any],
        retries: int,
    ) -> list[AIMessage]:
        sent = list(messages) if self.system_role else without_system_role(messages)
        client = self.client.bind_tools(list(tools)) if tools else self.client
        retrying = Retrying(
            stop=stop_after_attempt(retries + 1),
            wait=self._wait,
            retry=retry_if_exception(self._worth_retrying),
            reraise=True,
        )

        sent_params = self._with_reply_limit(params)

        def send() -> list[AIMessage]:
            if tools:
                return [client.invoke(sent, **sent_params)]
            result = client.generate([sent], n=n, **sent_params)
            return [generation.message for generation in result.generations[0]]

        started = time.monotonic()
        attempts = 0
        record: dict[str, Any] = {
            "candidate_id": _subject.get(),
            "prompt": [{"role": _role_name(m), "content": message_text(m)} for m in sent],
            "prompt_chars": sum(len(message_text(m)) for m in sent),
            "prompt_estimate": messages_tokens(sent, self.chars_per_token),
            "max_tokens": params["max_tokens"],
            "window": self.window().tokens,
            "window_source": self.window().source,
            "shortened": list(shortened),
            "response_format": (params.get("response_format") or {}).get("type"),
            "grammar": next(iter(params.get("grammar_body") or {}), None),
            "seed": params.get("seed"),
        }
        try:
            for attempt in retrying:
                with attempt:
                    attempts += 1
                    generated = send()
        except Exception as error:
            self._report(role, n, attempts, started, status="error", error=describe_error(error), **record)
            hint = f" after {self.cfg.timeout_s:g} s (raise --llm-timeout for a slow model)" if is_timeout(error) else ""
            raise LLMError(
                f"{role} LLM request failed after {attempts} attempt(s): {describe_error(error)}{hint}"
            ) from error
        if not generated:
            self._report(role, n, attempts, started, status="error", error="no choices", **record)
            raise LLMError(f"{role} LLM request returned no choices")
        record["reply_limit"] = reply_limit(params["max_tokens"])
        generated, record["replies_cut"] = cut_replies(generated, record["reply_limit"])
        for cut in record["replies_cut"]:
            log.warning("%s reply %d was %d bytes: cut to the first %d", role, cut["choice"], cut["bytes"],
                        record["reply_limit"])
        texts = [message_text(message) for message in generated]
        usage = generated[0].usage_metadata or {}
        prompt_tokens = int(usage.get("input_tokens", 0))
        completion_tokens = int(usage.get("output_tokens", 0))
        estimated = not usage or (prompt_tokens == 0 and completion_tokens == 0)
        if estimated:  # the server sent no usage: count what we sent and got, and say so
            prompt_tokens = record["prompt_estimate"]
            completion_tokens = sum(estimate_tokens(text, self.chars_per_token) for text in texts)
        else:
            self._measure(record["prompt_chars"], prompt_tokens)
        self.ledger.record(role, prompt_tokens, completion_tokens)
        self._report(
            role,
            n,
            attempts,
            started,
            status="ok",
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
            tokens_estimated=estimated,
            choices=len(generated),
            finish_reasons=[(m.response_metadata or {}).get("finish_reason") for m in generated],
            replies=texts,
            **record,
        )
        return generated

    def _measure(self, prompt_chars: int, prompt_tokens: int) -> None:
        """Learn the tokenizer's characters per token from a prompt the server counted: the
        smallest ratio seen, less 10% (chat-template tokens count too, and code is denser).
        A short prompt (the structured-output probe) is mostly template: it is not counted."""
        if prompt_tokens >= CALIBRATION_MIN_TOKENS and prompt_chars > 0:
            measured = CALIBRATION_MARGIN * prompt_chars / prompt_tokens
            self.chars_per_token = measured if self._measured is None else min(measured, self._measured)
            self._measured = self.chars_per_token

    def _with_reply_limit(self, params: dict[str, Any]) -> dict[str, Any]:
        """`max_tokens` as the server reads it: OpenAI's own API takes it as
        `max_completion_tokens` (langchain's spelling); OpenAI-compatible servers (llama.cpp,
        llama-cpp-python, Ollama, LM Studio) read only `max_tokens`, so it goes in the body.
        A `response_format` goes in the body as it is (langchain would parse the reply), and so do a
        grammar's fields."""
        body = {"response_format": params["response_format"]} if "response_format" in params else {}
        body.update(params.get("grammar_body") or {})  # a grammar's fields (agents.grammar_form)
        rest = {key: value for key, value in params.items() if key not in ("response_format", "grammar_body")}
        if self.cfg.base_url:
            body["max_tokens"] = rest.pop("max_tokens")
        return {**rest, "extra_body": body} if body else rest

    def _worth_retrying(self, error: BaseException) -> bool:
        """Transient errors; a timeout only when the server can tell us when it is idle again."""
        if rejects_system_role(error):
            return False
        if is_timeout(error):
            return server_busy(self.cfg.base_url, self._api_key) is not None
        return is_transient(error)

    def _wait(self, state: RetryCallState) -> float:
        """After a timeout: until the server's slots are idle. Else the server's Retry-After
        when given (capped), else exponential backoff with jitter."""
        error = state.outcome.exception() if state.outcome else None
        if error is not None and is_timeout(error):
            self._wait_until_idle()
            return 0.0
        asked = retry_after_s(error)
        if asked is not None:
            return min(asked, self.cfg.retry_max_s)
        backoff = wait_random_exponential(
            multiplier=self.cfg.retry_base_s, max=self.cfg.retry_max_s
        )
        return backoff(state)

    def _wait_until_idle(self) -> None:
        """Poll `/slots` until the abandoned request is done (at most one more timeout)."""
        waited = 0.0
        while server_busy(self.cfg.base_url, self._api_key):
            if waited >= self.cfg.timeout_s:
                raise LLMError(
                    f"the LLM server is still busy {waited:.0f} s after a request timed out; "
                    "raise --llm-timeout for a slow model"
                )
            self.sleep(self.cfg.retry_base_s)
            waited += self.cfg.retry_base_s

    def _report(self, role: str, n: int, attempts: int, started: float, **fields: Any) -> None:
        if self.on_call is not None:
            info = {
                "role": role,
                "model": self.cfg.model,
                "n": n,
                "attempts": attempts,
                "elapsed_s": round(time.monotonic() - started, 3),
                **fields,
            }
            self.on_call(role, info)


REMEMBERED_FITS = 64  # prompts whose fit is kept to fit again after a refusal (one per role in flight)


def without_system_role(messages: Sequence[BaseMessage]) -> list[BaseMessage]:
    """The conversation for a template with no system role: system text opens the first user turn."""
    system = "\n\n".join(message_text(m) for m in messages if isinstance(m, SystemMessage))
    rest = [m for m in messages if not isinstance(m, SystemMessage)]
    if not system:
        return rest
    if rest and isinstance(rest[0], HumanMessage):
        return [HumanMessage(f"{system}\n\n{message_text(rest[0])}"), *rest[1:]]
    return [HumanMessage(system), *rest]


def _role_name(message: BaseMessage) -> str:
    return {"system": "system", "human": "user", "ai": "assistant", "tool": "tool"}.get(message.type, message.type)
