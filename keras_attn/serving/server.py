"""An OpenAI-compatible HTTP server for an `Engine` (starlette + uvicorn,
the `[serve]` extra)."""

import asyncio
import contextlib
import dataclasses
import json
import math
import os
import re
import threading
import time
import uuid

from keras_attn.serving.sampling import MAX_LOGPROBS
from keras_attn.serving.sampling import SamplingParams

# The request fields each endpoint reads, and how they become
# `SamplingParams` fields (None: read by the endpoint itself).
SAMPLING_FIELDS = {
    "max_tokens": "max_new_tokens",
    "temperature": "temperature",
    "top_p": "top_p",
    "top_k": "top_k",
    "min_p": "min_p",
    "repetition_penalty": "repetition_penalty",
    "no_repeat_ngram_size": "no_repeat_ngram_size",
    "min_tokens": "min_new_tokens",
    "stop": "stop",
    "seed": "seed",
}
# The most choices (`n`) a request may ask for (OpenAI's limit); each is a
# request of the engine.
MAX_CHOICES = 128
COMMON_FIELDS = ("model", "n", "stream", "stream_options", "user")
COMPLETION_FIELDS = frozenset(("prompt", "logprobs") + COMMON_FIELDS + tuple(SAMPLING_FIELDS))
CHAT_FIELDS = frozenset(
    ("messages", "logprobs", "top_logprobs") + COMMON_FIELDS + tuple(SAMPLING_FIELDS)
)
# What each field must be, for the message of a wrong type.
FIELD_TYPES = {
    "model": "a string", "user": "a string", "n": "an integer", "stream": "true or false",
    "max_tokens": "an integer", "min_tokens": "an integer",
    "no_repeat_ngram_size": "an integer", "top_k": "an integer or null",
    "temperature": "a number", "top_p": "a number", "min_p": "a number",
    "repetition_penalty": "a number", "seed": "an integer or null",
    "stop": "a string, a list of strings or null", "top_logprobs": "an integer or null",
}


class BadRequest(Exception):
    """A request the server answers with `status` and an OpenAI error body
    naming `param`."""

    def __init__(self, message, param=None, status=400, kind="invalid_request_error"):
        super().__init__(message)
        self.message, self.param, self.status, self.kind = message, param, status, kind


class ChatTemplate:
    """A Hugging Face chat template (Jinja2, rendered in a sandbox as
    transformers renders it) that turns `messages` into a prompt.

    Args:
        source: the template's Jinja2 text.
        special_tokens: the variables it may read beside `messages` and
            `add_generation_prompt` (`bos_token`, `eos_token`, ...).
    """

    def __init__(self, source, special_tokens=None):
        import jinja2
        from jinja2.sandbox import ImmutableSandboxedEnvironment

        def raise_exception(message):
            raise jinja2.exceptions.TemplateError(message)

        environment = ImmutableSandboxedEnvironment(
            trim_blocks=True, lstrip_blocks=True, extensions=["jinja2.ext.loopcontrols"]
        )
        environment.filters["tojson"] = lambda value, indent=None: json.dumps(
            value, ensure_ascii=False, indent=indent
        )
        environment.globals["raise_exception"] = raise_exception
        environment.globals["strftime_now"] = lambda format: time.strftime(format)
        self.source = source
        self.special_tokens = dict(special_tokens or {})
        try:
            self._template = environment.from_string(source)
        except jinja2.exceptions.TemplateSyntaxError as error:
            raise ValueError(f"the chat template does not parse: {error}") from error

    @classmethod
    def from_folder(cls, folder):
        """The template of a checkpoint folder (`chat_template.jinja`, else
        the `chat_template` of `tokenizer_config.json`), or None."""
        config = {}
        path = os.path.join(folder, "tokenizer_config.json")
        if os.path.isfile(path):
            with open(path, encoding="utf-8") as file:
                config = json.load(file)
        tokens = {}
        for role in ("bos_token", "eos_token", "pad_token", "unk_token"):
            value = config.get(role)
            value = value.get("content") if isinstance(value, dict) else value
            if isinstance(value, str):
                tokens[role] = value
        jinja_path = os.path.join(folder, "chat_template.jinja")
        if os.path.isfile(jinja_path):
            with open(jinja_path, encoding="utf-8") as file:
                return cls(file.read(), tokens)
        source = config.get("chat_template")
        if isinstance(source, list):  # named templates: the default one
            named = {t.get("name"): t.get("template") for t in source if isinstance(t, dict)}
            source = named.get("default")
        return cls(source, tokens) if isinstance(source, str) else None

    def render(self, messages):
        """The prompt text of `messages`, ending with the assistant's turn;
        a ValueError where the template refuses them."""
        import jinja2

        try:
            return self._template.render(
                messages=messages, add_generation_prompt=True, **self.special_tokens
            )
        except (jinja2.exceptions.TemplateError, TypeError, ValueError, KeyError) as error:
            raise ValueError(f"the chat template refused the messages: {error}") from error


def create_app(engine, model_name, tokenizer=None, chat_template=None, max_waiting=256,
               max_body_bytes=1 << 20, shutdown_timeout=30.0):
    """The ASGI application (starlette) of an OpenAI-compatible server over
    `engine`.

    Endpoints: `POST /v1/completions` (`prompt`: a string or token ids),
    `POST /v1/chat/completions` (`messages` rendered by the chat template),
    `GET /v1/models`, `GET /health`. The generating endpoints read
    `SamplingParams`' fields under OpenAI's names, `n` (1 only), `stream`
    (server-sent events), `model` and `user`; `max_tokens` defaults to 16 for
    completions and to the rest of `engine.max_length` for chats. Bad
    requests get a 4xx OpenAI error body naming the field (400 invalid, 404
    another `model`, 413 a body over `max_body_bytes`, 429 while
    `max_waiting` requests wait). A client that disconnects cancels its
    request; at shutdown requests still running after `shutdown_timeout`
    are cancelled. docs/serving.md has the details.

    Args:
        engine: a `keras_attn.serving.Engine`; with a tokenizer for text.
        model_name: the name `/v1/models` lists and responses carry.
        tokenizer: its tokenizer (default `engine.tokenizer`), to encode
            text prompts and rendered chats.
        chat_template: a `ChatTemplate` or its Jinja2 source; None refuses
            chats.
        max_waiting: requests that may wait for admission before new ones
            get 429.
        max_body_bytes: the largest request body.
        shutdown_timeout: seconds requests in flight get at shutdown.

    Example:

    ```python
    app = create_app(engine, "tiny-gpt2")
    uvicorn.run(app, port=8000)
    ```
    """
    from starlette.applications import Starlette
    from starlette.responses import JSONResponse, StreamingResponse
    from starlette.routing import Route

    tokenizer = engine.tokenizer if tokenizer is None else tokenizer
    if isinstance(chat_template, str):
        chat_template = ChatTemplate(chat_template)

    def error_response(error):
        body = {"error": {"message": error.message, "type": error.kind, "param": error.param,
                          "code": None}}
        headers = {"Retry-After": "1"} if error.status == 429 else None
        return JSONResponse(body, status_code=error.status, headers=headers)

    async def read_json(request, fields):
        length = request.headers.get("content-length")
        if length is not None and length.isdigit() and int(length) > max_body_bytes:
            raise BadRequest(f"the body's {length} bytes exceed the limit of {max_body_bytes}.",
                             status=413)
        body = bytearray()
        async for chunk in request.stream():
            body.extend(chunk)
            if len(body) > max_body_bytes:
                raise BadRequest(f"the body exceeds the limit of {max_body_bytes} bytes.",
                                 status=413)
        try:
            document = json.loads(bytes(body))
        except (UnicodeDecodeError, ValueError) as error:
            raise BadRequest(f"the body is not valid JSON: {error}") from None
        if not isinstance(document, dict):
            raise BadRequest(f"the body must be a JSON object, found a JSON "
                             f"{type(document).__name__}.")
        unknown = sorted(set(document) - fields)
        if unknown:
            raise BadRequest(
                f"unknown field{'s' if len(unknown) > 1 else ''} {', '.join(unknown)}; this "
                f"endpoint reads {', '.join(sorted(fields))}.", param=unknown[0],
            )
        return document

    async def submit(document, prompt, default_max_tokens):
        """The engine's requests of the document's `n` choices: choice `i`
        of a seeded request draws with `(seed + i) mod 2**63`."""
        check_common(document, model_name)
        params = sampling_params(document, default_max_tokens(prompt))
        count = logprobs_count(document)
        if count is not None:
            if tokenizer is None:
                raise BadRequest("this server has no tokenizer to name the tokens of "
                                 "`logprobs`.", param="logprobs")
            params = dataclasses.replace(params, logprobs=count)
        choices = [
            params if params.seed is None
            else dataclasses.replace(params, seed=(params.seed + i) % 2**63)
            for i in range(document.get("n", 1))
        ]
        # The engine's lock is held through a whole step: wait for it in a
        # thread, not in the event loop.
        return await asyncio.to_thread(enqueue, prompt, choices)

    def enqueue(prompt, choices):
        if engine.stats()["waiting"] >= max_waiting:
            raise BadRequest(f"{max_waiting} requests wait already; retry later.",
                             status=429, kind="rate_limit_error")
        running = []
        try:
            for params in choices:
                running.append(engine.submit(prompt, params))
        except ValueError as error:
            cancel_all(running)
            message = str(error).replace("max_new_tokens", "max_tokens")
            raise BadRequest(message, param="max_tokens" if "max_length" in message
                             else "prompt" if "prompt" in message else None) from None
        except RuntimeError as error:
            cancel_all(running)
            raise BadRequest(str(error), status=503, kind="server_error") from None
        return running

    def encode_text(text):
        if tokenizer is None:
            raise BadRequest("this server has no tokenizer: give the prompt as token ids.",
                             param="prompt")
        # A rendered chat holds its own special tokens (transformers encodes
        # it without adding any); HuggingFaceTokenizer's `tokenizers` object.
        fast = getattr(tokenizer, "_fast", None)
        if fast is not None:
            return list(fast.encode(text, add_special_tokens=False).ids)
        return list(tokenizer.encode(text)[0])

    async def completions(request):
        try:
            document = await read_json(request, COMPLETION_FIELDS)
            prompt = completion_prompt(document)
            if isinstance(prompt, str):
                if tokenizer is None:
                    raise BadRequest("this server has no tokenizer: give the prompt as token "
                                     "ids.", param="prompt")
                prompt = tokenizer.encode(prompt)[0]
            running = await submit(document, prompt, lambda _: 16)
        except BadRequest as error:
            return error_response(error)
        return await answer(request, running, document, chat=False)

    async def chat_completions(request):
        try:
            document = await read_json(request, CHAT_FIELDS)
            messages = chat_messages(document)
            if chat_template is None:
                raise BadRequest(
                    f"{model_name} has no chat template (no chat_template in its "
                    "tokenizer_config.json or chat_template.jinja): use /v1/completions.",
                    param="messages",
                )
            try:
                text = chat_template.render(messages)
            except ValueError as error:  # the template's own refusals (raise_exception)
                raise BadRequest(str(error), param="messages") from None
            prompt = encode_text(text)
            running = await submit(document, prompt,
                                   lambda ids: max(engine.max_length - len(ids), 1))
        except BadRequest as error:
            return error_response(error)
        return await answer(request, running, document, chat=True)

    def logprob_writer(request, chat):
        """A `LogprobWriter` of `request`, or None when it records none."""
        if request.params.logprobs is None:
            return None
        return LogprobWriter(request, tokenizer, chat)

    async def answer(http_request, running, document, chat):
        """The response to the requests `running`, one per choice."""
        identifier = f"{'chatcmpl' if chat else 'cmpl'}-{uuid.uuid4().hex}"
        created = int(time.time())
        if document.get("stream", False):
            kind = "chat.completion.chunk" if chat else "text_completion"

            with_usage = (document.get("stream_options") or {}).get("include_usage", False)

            def chunk(index, choice, usage=None):
                body = {
                    "id": identifier, "object": kind, "created": created, "model": model_name,
                    "choices": [] if choice is None else [dict(index=index, **choice)],
                }
                if with_usage:
                    # OpenAI's form: null in every chunk, then one chunk with
                    # no choices and the whole request's usage.
                    body["usage"] = usage
                return "data: " + json.dumps(body) + "\n\n"

            logged = [logprob_writer(r, chat) for r in running]

            async def events():
                try:
                    if chat:
                        for index in range(len(running)):
                            yield chunk(index, {"delta": {"role": "assistant", "content": ""},
                                                "finish_reason": None})
                    async for index, delta in follow_all(running):
                        if delta.text or (logged[index] and delta.tokens):
                            choice = ({"delta": {"content": delta.text}, "finish_reason": None}
                                      if chat else {"text": delta.text, "finish_reason": None})
                            if logged[index]:
                                choice["logprobs"] = logged[index].add(len(delta.tokens))
                            yield chunk(index, choice)
                        if delta.finish_reason is not None:
                            yield chunk(index, {"delta": {}, "finish_reason": delta.finish_reason}
                                        if chat else {"text": "",
                                                      "finish_reason": delta.finish_reason})
                    if with_usage:
                        yield chunk(0, None, usage(running))
                    yield "data: [DONE]\n\n"
                finally:
                    cancel_all(running)

            return StreamingResponse(events(), media_type="text/event-stream",
                                     headers={"Cache-Control": "no-cache"})
        texts = [[] for _ in running]
        reasons = [None] * len(running)
        waiting = asyncio.ensure_future(watch_disconnect(http_request, running))
        try:
            async for index, delta in follow_all(running):
                texts[index].append(delta.text)
                reasons[index] = delta.finish_reason or reasons[index]
        finally:
            waiting.cancel()
            cancel_all(running)
        choices = []
        for index, (text, reason) in enumerate(zip(texts, reasons)):
            text = "".join(text)
            choice = ({"index": index, "message": {"role": "assistant", "content": text}} if chat
                      else {"index": index, "text": text})
            writer = logprob_writer(running[index], chat)
            choice["logprobs"] = writer.add(len(running[index].tokens)) if writer else None
            choice["finish_reason"] = reason
            choices.append(choice)
        return JSONResponse({
            "id": identifier, "object": "chat.completion" if chat else "text_completion",
            "created": created, "model": model_name, "choices": choices,
            "usage": usage(running),
        })

    async def health(request):
        stats = await asyncio.to_thread(engine.stats)
        return JSONResponse({"status": "ok", "model": model_name, **stats})

    async def models(request):
        return JSONResponse({"object": "list", "data": [
            {"id": model_name, "object": "model", "created": 0, "owned_by": "keras_attn"}
        ]})

    @contextlib.asynccontextmanager
    async def lifespan(app):
        engine.start()
        yield
        loop = asyncio.get_running_loop()
        deadline = loop.time() + shutdown_timeout
        while engine.busy and loop.time() < deadline:
            await asyncio.sleep(0.02)
        await asyncio.to_thread(engine.stop, cancel=True)

    app = Starlette(
        routes=[
            Route("/v1/completions", completions, methods=["POST"]),
            Route("/v1/chat/completions", chat_completions, methods=["POST"]),
            Route("/v1/models", models, methods=["GET"]),
            Route("/health", health, methods=["GET"]),
        ],
        lifespan=lifespan,
    )
    app.state.engine = engine
    app.state.model_name = model_name
    return app


async def follow(request):
    """`request`'s `Delta`s, without blocking the event loop: a thread
    iterates the request (blocking on its queue) and hands each delta to
    the loop."""
    loop = asyncio.get_running_loop()
    deltas = asyncio.Queue()

    def pump():
        try:
            for delta in request:
                loop.call_soon_threadsafe(deltas.put_nowait, delta)
        except RuntimeError:  # the loop closed: nobody reads the request
            request.cancel()
            return
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(deltas.put_nowait, None)

    threading.Thread(target=pump, name=f"keras_attn-request-{request.request_id}",
                     daemon=True).start()
    while True:
        delta = await deltas.get()
        if delta is None:
            return
        yield delta


async def follow_all(requests):
    """`(index, delta)` of every request of `requests` as they come."""
    merged = asyncio.Queue()

    async def pump(index, request):
        async for delta in follow(request):
            await merged.put((index, delta))
        await merged.put((index, None))

    tasks = [asyncio.ensure_future(pump(i, r)) for i, r in enumerate(requests)]
    try:
        running = len(tasks)
        while running:
            index, delta = await merged.get()
            if delta is None:
                running -= 1
            else:
                yield index, delta
    finally:
        for task in tasks:
            task.cancel()


def cancel_all(requests):
    """Cancels every unfinished request of `requests` (see `cancel`)."""
    for request in requests:
        cancel(request)


def cancel(request):
    """Cancels `request` unless it finished, from a worker thread (the
    engine's lock is held through a whole step; this may run in a cancelled
    task, which must not wait)."""
    if not request.finished:
        threading.Thread(target=request.cancel, name="keras_attn-cancel", daemon=True).start()


async def watch_disconnect(http_request, running):
    """Cancels the requests `running` when the client of `http_request`
    disconnects."""
    while not all(request.finished for request in running):
        message = await http_request.receive()
        if message["type"] == "http.disconnect":
            cancel_all(running)
            return


def logprobs_count(document):
    """How many alternatives each token's log-probabilities list, or None
    for none: completions' `logprobs` (an integer); chats' `logprobs`
    (true or false) and `top_logprobs` (an integer, with `logprobs`)."""
    if "messages" not in document:
        count = document.get("logprobs")
        if count is not None and not is_integer(count):
            raise BadRequest(f"`logprobs` must be an integer or null; received {short(count)}.",
                             param="logprobs")
    else:
        wanted = document.get("logprobs", False)
        if not isinstance(wanted, bool):
            raise BadRequest(f"`logprobs` must be true or false; received {short(wanted)}.",
                             param="logprobs")
        count = document.get("top_logprobs")
        if count is not None and not is_integer(count):
            raise BadRequest(type_message("top_logprobs", count), param="top_logprobs")
        if count is not None and not wanted:
            raise BadRequest("`top_logprobs` needs `logprobs: true`.", param="top_logprobs")
        count = (count or 0) if wanted else None
    if count is not None and not 0 <= count <= MAX_LOGPROBS:
        field = "logprobs" if "messages" not in document else "top_logprobs"
        raise BadRequest(f"`{field}` must be an integer from 0 to {MAX_LOGPROBS}; received "
                         f"{count}.", param=field)
    return count


class LogprobWriter:
    """The `logprobs` of a choice's tokens in OpenAI's form, a part at a
    time: completions' `{"tokens", "token_logprobs", "top_logprobs",
    "text_offset"}` or chats' `{"content": [{"token", "logprob", "bytes",
    "top_logprobs"}]}`. A token's text is its id decoded alone, or
    `"token_id:<id>"` for a token that is a piece of a character (then
    its `bytes` are null), so that no two tokens share a name;
    `text_offset` is where it starts in the choice's text, the decoded
    tokens before it."""

    def __init__(self, request, tokenizer, chat):
        self.request, self.tokenizer, self.chat = request, tokenizer, chat
        self.written = 0

    def text(self, token):
        text = self.tokenizer.decode([token])
        return f"token_id:{token}" if "\ufffd" in text else text

    def add(self, count):
        """The logprobs of the next `count` tokens."""
        start, self.written = self.written, self.written + count
        entries = self.request.logprobs[start:self.written]
        if self.chat:
            def entry(token, logprob):
                text = self.text(token)
                whole = not text.startswith("token_id:")
                return {"token": text, "logprob": logprob,
                        "bytes": list(text.encode("utf-8")) if whole else None}

            return {"content": [
                dict(entry(e.token, e.logprob), top_logprobs=[entry(t, lp) for t, lp in e.top])
                for e in entries
            ]}
        tokens = self.request.tokens
        return {
            "tokens": [self.text(e.token) for e in entries],
            "token_logprobs": [e.logprob for e in entries],
            "top_logprobs": [{self.text(t): lp for t, lp in e.top} for e in entries],
            "text_offset": [
                len(self.tokenizer.decode(tokens[:i])) if i else 0
                for i in range(start, self.written)
            ],
        }


def usage(requests):
    """OpenAI's `usage` of the finished `requests` of one prompt (its
    choices): the prompt's tokens, once, and every choice's generated
    tokens."""
    prompt = len(requests[0].prompt)
    completion = sum(len(request.tokens) for request in requests)
    return {"prompt_tokens": prompt, "completion_tokens": completion,
            "total_tokens": prompt + completion}


def check_common(document, model_name):
    """The fields every generating request may give beside its sampling."""
    for name in ("model", "user"):
        if name in document and not isinstance(document[name], str):
            raise BadRequest(type_message(name, document[name]), param=name)
    if "model" in document and document["model"] != model_name:
        raise BadRequest(f"model {document['model']!r} is not served here; this server serves "
                         f"{model_name!r}.", param="model", status=404, kind="not_found_error")
    n = document.get("n", 1)
    if not is_integer(n):
        raise BadRequest(type_message("n", n), param="n")
    if not 1 <= n <= MAX_CHOICES:
        raise BadRequest(f"`n` must be from 1 to {MAX_CHOICES}; received n={n}.", param="n")
    if not isinstance(document.get("stream", False), bool):
        raise BadRequest(type_message("stream", document["stream"]), param="stream")
    options = document.get("stream_options")
    if options is not None:
        if not document.get("stream", False):
            raise BadRequest("`stream_options` is only read with stream: true.",
                             param="stream_options")
        if not isinstance(options, dict) or set(options) - {"include_usage"}:
            raise BadRequest(
                "`stream_options` must be an object whose only field is include_usage; "
                f"received {json.dumps(options)}.", param="stream_options",
            )
        if not isinstance(options.get("include_usage", False), bool):
            raise BadRequest(
                "`stream_options.include_usage` must be true or false; received "
                f"{json.dumps(options['include_usage'])}.", param="stream_options",
            )


def sampling_params(document, default_max_tokens):
    """The `SamplingParams` of a request's fields; a `BadRequest` naming
    the field for a wrong type or a value out of range."""
    values = {"max_new_tokens": default_max_tokens}
    for field, name in SAMPLING_FIELDS.items():
        if field not in document:
            continue
        value = document[field]
        if field in ("seed", "top_k", "stop") and value is None:
            continue
        if field == "stop":
            ok = isinstance(value, str) or (
                isinstance(value, list) and all(isinstance(s, str) for s in value))
        elif name in ("temperature", "top_p", "min_p", "repetition_penalty"):
            ok = is_number(value)
        else:
            ok = is_integer(value)
        if not ok:
            raise BadRequest(type_message(field, value), param=field)
        values[name] = tuple(value) if isinstance(value, list) else value
    try:
        return SamplingParams(**values)
    except ValueError as error:
        message = str(error)
        for field, name in SAMPLING_FIELDS.items():
            message = message.replace(name, field) if field != name else message
        found = re.search(r"`(\w+)`", message)
        raise BadRequest(message, param=found.group(1) if found else None) from None


def completion_prompt(document):
    if "prompt" not in document:
        raise BadRequest("`prompt` is required.", param="prompt")
    prompt = document["prompt"]
    if isinstance(prompt, str):
        return prompt
    if isinstance(prompt, list) and prompt and all(is_integer(t) for t in prompt):
        return prompt
    raise BadRequest("`prompt` must be a string or a non-empty list of token ids (one prompt "
                     f"per request); received {short(prompt)}.", param="prompt")


def chat_messages(document):
    if "messages" not in document:
        raise BadRequest("`messages` is required.", param="messages")
    messages = document["messages"]
    if not isinstance(messages, list) or not messages:
        raise BadRequest("`messages` must be a non-empty list of {role, content} objects; "
                         f"received {short(messages)}.", param="messages")
    for index, message in enumerate(messages):
        if (not isinstance(message, dict) or not isinstance(message.get("role"), str)
                or not isinstance(message.get("content"), str)):
            raise BadRequest(f"`messages[{index}]` must be an object with a string `role` and "
                             f"a string `content`; received {short(message)}.", param="messages")
    return messages


def is_integer(value):
    return isinstance(value, int) and not isinstance(value, bool)


def is_number(value):
    return (isinstance(value, (int, float)) and not isinstance(value, bool)
            and math.isfinite(value))


def type_message(field, value):
    return f"`{field}` must be {FIELD_TYPES[field]}; received {short(value)}."


def short(value):
    text = json.dumps(value)
    return text if len(text) <= 80 else text[:77] + "..."


def load(model_dir, max_batch=8, max_length=None, block_size=16, num_blocks=None,
         prefill_chunk=None):
    """`(engine, tokenizer, chat_template)` of a Hugging Face checkpoint
    folder: the model built with `application="lm"` from its `config.json`
    and weights, its `tokenizer.json` (`HuggingFaceTokenizer`), its chat
    template (None where it has none) and an `Engine` over them."""
    from keras_attn.models.builder import build_transformer_model
    from keras_attn.serving.engine import Engine
    from keras_attn.tokenizers.huggingface_tokenizer import HuggingFaceTokenizer

    model = build_transformer_model(os.fspath(model_dir), application="lm")
    tokenizer = HuggingFaceTokenizer(os.fspath(model_dir))
    try:
        end = tokenizer.end_id
    except ValueError:  # no eos_token: the model config's eos_token_id
        with open(os.path.join(model_dir, "config.json"), encoding="utf-8") as file:
            end = json.load(file).get("eos_token_id")
    engine = Engine(model, max_batch=max_batch, max_length=max_length, block_size=block_size,
                    num_blocks=num_blocks, prefill_chunk=prefill_chunk, tokenizer=tokenizer,
                    end_token_ids=[] if end is None else end)
    return engine, tokenizer, ChatTemplate.from_folder(os.fspath(model_dir))


def serve(model_dir, host="127.0.0.1", port=8000, max_batch=8, max_length=None, block_size=16,
          num_blocks=None, prefill_chunk=None, max_waiting=256, max_body_bytes=1 << 20,
          shutdown_timeout=30.0, log_level="info", warm_up=True):
    """Serves the Hugging Face checkpoint folder `model_dir` (see `load`)
    with `create_app` on uvicorn until interrupted (Ctrl-C); requests in
    flight get `shutdown_timeout` seconds to finish. With `warm_up`, the
    engine builds every program (`Engine.warm_up`) before the server
    listens."""
    import uvicorn

    engine, tokenizer, chat_template = load(model_dir, max_batch, max_length, block_size,
                                            num_blocks, prefill_chunk)
    if warm_up:
        engine.warm_up()
    name = os.path.basename(os.path.normpath(os.fspath(model_dir)))
    app = create_app(engine, name, tokenizer, chat_template, max_waiting=max_waiting,
                     max_body_bytes=max_body_bytes, shutdown_timeout=shutdown_timeout)
    uvicorn.run(app, host=host, port=port, log_level=log_level,
                timeout_graceful_shutdown=shutdown_timeout)
