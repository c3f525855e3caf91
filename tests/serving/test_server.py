"""`keras-attn serve`'s HTTP server (keras_attn.serving.server) over a real
socket, driven by the standard library's HTTP client: its answers equal the
engine's for the same request, chats are rendered as transformers renders
them, bad requests get a 4xx naming the field, a client that goes away
frees its blocks, and shutdown lets requests in flight finish.

The server is host code around `Engine` (the engine's steps are tested on
every backend in test_engine.py), so it runs on torch only, whose eager
steps need no compiling."""

import http.client
import json
import socket
import threading
import time

import keras
import numpy as np
import pytest

if keras.config.backend() != "torch":
    pytest.skip("the server is backend-independent host code: tested on torch",
                allow_module_level=True)
uvicorn = pytest.importorskip("uvicorn")
pytest.importorskip("starlette")
transformers = pytest.importorskip("transformers")

import keras_attn_cli
from keras_attn.serving import (
    Engine,
    SamplingParams,
)
from keras_attn.serving import server as server_module
from keras_attn.serving.server import (
    ChatTemplate,
    create_app,
    load,
)

SPECIALS = ["<|endoftext|>", "<|user|>", "<|assistant|>"]
CHAT_TEMPLATE = (
    "{% for message in messages %}<|{{ message['role'] }}|>{{ message['content'] }}\n"
    "{% endfor %}{% if add_generation_prompt %}<|assistant|>{% endif %}"
)
MAX_LENGTH = 64


def write_folder(folder, chat_template):
    """A random tiny GPT-2 saved by transformers, with a byte-level BPE
    tokenizer.json trained on the standard library's json sources."""
    import inspect
    import json.decoder
    import json.encoder

    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    corpus = (inspect.getsource(json.encoder) + inspect.getsource(json.decoder)).splitlines()
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=400, special_tokens=SPECIALS, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tokenizer.train_from_iterator(corpus, trainer)
    fast = transformers.PreTrainedTokenizerFast(tokenizer_object=tokenizer,
                                                eos_token="<|endoftext|>")
    fast.save_pretrained(str(folder))
    config_path = folder / "tokenizer_config.json"
    config = json.loads(config_path.read_text())
    if chat_template is not None:
        config["chat_template"] = chat_template
    config_path.write_text(json.dumps(config))
    (folder / "chat_template.jinja").unlink(missing_ok=True)
    import torch

    torch.manual_seed(0)
    end = tokenizer.token_to_id("<|endoftext|>")
    model = transformers.GPT2LMHeadModel(transformers.GPT2Config(
        vocab_size=tokenizer.get_vocab_size(), n_positions=MAX_LENGTH, n_embd=32, n_layer=2,
        n_head=2, bos_token_id=end, eos_token_id=end, initializer_range=0.3,
    ))
    model.save_pretrained(str(folder))
    return folder


class Server:
    """`app` on uvicorn in a thread, on a free port of 127.0.0.1."""

    def __init__(self, app):
        self.app = app
        self.engine = app.state.engine
        self.socket = socket.socket()
        self.socket.bind(("127.0.0.1", 0))
        self.port = self.socket.getsockname()[1]
        self.server = uvicorn.Server(uvicorn.Config(
            app, log_level="warning", timeout_graceful_shutdown=30, lifespan="on"))
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self.socket]},
                                       daemon=True)
        self.thread.start()
        for _ in range(600):
            if self.server.started:
                break
            time.sleep(0.05)
        assert self.get("/health")[0] == 200

    def stop(self):
        self.server.should_exit = True
        self.thread.join(60)
        self.socket.close()

    def connection(self):
        return http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)

    def get(self, path):
        connection = self.connection()
        connection.request("GET", path)
        response = connection.getresponse()
        return response.status, json.loads(response.read())

    def post(self, path, body):
        """`(status, JSON answer)`; `body` a dict, or bytes sent as they are."""
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        connection = self.connection()
        connection.request("POST", path, data, {"Content-Type": "application/json"})
        response = connection.getresponse()
        status, answer = response.status, json.loads(response.read())
        connection.close()
        return status, answer

    def events(self, path, body, keep=None):
        """The `data:` payloads of a streamed answer, up to `[DONE]`; with
        `keep=k` the connection is closed after `k` of them."""
        connection = self.connection()
        connection.request("POST", path, json.dumps(dict(body, stream=True)).encode(),
                           {"Content-Type": "application/json"})
        response = connection.getresponse()
        assert response.status == 200, response.read()
        assert response.getheader("content-type").startswith("text/event-stream")
        events = []
        for line in response:
            if not line.startswith(b"data: "):
                assert line == b"\n", line
                continue
            payload = line[len(b"data: "):].strip()
            if payload == b"[DONE]":
                events.append("[DONE]")
                break
            events.append(json.loads(payload))
            if keep is not None and len(events) >= keep:
                break
        connection.sock.shutdown(socket.SHUT_RDWR)
        connection.close()
        return events


def recorded(engine):
    """Records every `Request` the engine is given (`engine.submitted`)."""
    submit = engine.submit
    engine.submitted = []

    def recording(*args, **kwargs):
        request = submit(*args, **kwargs)
        engine.submitted.append(request)
        return request

    engine.submit = recording
    return engine


def wait_idle(engine):
    for _ in range(600):
        if not engine.busy:
            return
        time.sleep(0.05)
    raise AssertionError(f"the engine is still busy: {engine.stats()}")


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return write_folder(tmp_path_factory.mktemp("tiny_gpt2"), CHAT_TEMPLATE)


@pytest.fixture(scope="module")
def served(folder):
    engine, tokenizer, template = load(folder, max_batch=4, max_length=MAX_LENGTH, block_size=8,
                                       prefill_chunk=8)
    app = create_app(recorded(engine), "tiny_gpt2", tokenizer, template, max_body_bytes=4096)
    server = Server(app)
    yield server
    server.stop()


def reference(engine, prompt, **params):
    """The engine's own answer to the same request."""
    request = engine.submit(prompt, SamplingParams(**params))
    request.result(60)
    return request


def test_completions_equal_the_engines_answer(served):
    engine = served.engine
    tokenizer = engine.tokenizer
    prompt = "def encode(self, o):"
    ids = tokenizer.encode(prompt)[0]
    expected = reference(engine, ids, max_new_tokens=12)
    assert len(expected.text) >= 4  # enough text to cut with a stop string below
    for body in ({"prompt": prompt}, {"prompt": ids, "model": "tiny_gpt2"}):
        status, answer = served.post("/v1/completions", dict(body, max_tokens=12))
        assert status == 200, answer
        assert answer["object"] == "text_completion" and answer["model"] == "tiny_gpt2"
        (choice,) = answer["choices"]
        assert choice["index"] == 0
        assert choice["text"] == expected.text
        assert choice["finish_reason"] == expected.finish_reason
        assert answer["usage"] == {"prompt_tokens": len(ids),
                                   "completion_tokens": len(expected.tokens),
                                   "total_tokens": len(ids) + len(expected.tokens)}

    events = served.events("/v1/completions", {"prompt": prompt, "max_tokens": 12})
    assert events[-1] == "[DONE]"
    chunks = events[:-1]
    assert {chunk["object"] for chunk in chunks} == {"text_completion"}
    assert len({chunk["id"] for chunk in chunks}) == 1
    assert "".join(chunk["choices"][0]["text"] for chunk in chunks) == expected.text
    assert [c["choices"][0]["finish_reason"] for c in chunks][-1] == expected.finish_reason
    assert all(c["choices"][0]["finish_reason"] is None for c in chunks[:-1])

    # With `stream_options.include_usage`, OpenAI's form: `usage` null in
    # every chunk, then a chunk with no choices and the request's usage.
    events = served.events("/v1/completions", {"prompt": prompt, "max_tokens": 12,
                                               "stream_options": {"include_usage": True}})
    assert events[-1] == "[DONE]"
    *chunks, last = events[:-1]
    assert "".join(chunk["choices"][0]["text"] for chunk in chunks) == expected.text
    assert all(chunk["usage"] is None for chunk in chunks)
    assert last["choices"] == [] and last["id"] == chunks[0]["id"]
    assert last["usage"] == {"prompt_tokens": len(ids), "completion_tokens": len(expected.tokens),
                             "total_tokens": len(ids) + len(expected.tokens)}
    events = served.events("/v1/completions", {"prompt": prompt, "max_tokens": 12,
                                               "stream_options": {"include_usage": False}})
    assert all("usage" not in chunk for chunk in events[:-1])

    # A stop string cuts the text before it, streamed or not.
    stop = expected.text[2:4]
    cut = expected.text[:expected.text.index(stop)]
    status, answer = served.post("/v1/completions",
                                 {"prompt": prompt, "max_tokens": 12, "stop": [stop]})
    assert (status, answer["choices"][0]["text"]) == (200, cut)
    assert answer["choices"][0]["finish_reason"] == "stop"
    events = served.events("/v1/completions", {"prompt": prompt, "max_tokens": 12, "stop": stop})
    assert "".join(chunk["choices"][0]["text"] for chunk in events[:-1]) == cut


def test_chat_completions_render_the_folders_template_as_transformers(served, folder):
    messages = [{"role": "user", "content": "Return the JSON text."},
                {"role": "assistant", "content": "def dumps(obj):"},
                {"role": "user", "content": "and decode it"}]
    hf = transformers.AutoTokenizer.from_pretrained(str(folder))
    ids = hf.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)
    ids = list(ids["input_ids"] if isinstance(ids, dict) or hasattr(ids, "keys") else ids)
    expected = reference(served.engine, ids, max_new_tokens=10)

    status, answer = served.post("/v1/chat/completions", {"messages": messages, "max_tokens": 10})
    assert status == 200, answer
    assert answer["object"] == "chat.completion"
    (choice,) = answer["choices"]
    assert choice["message"] == {"role": "assistant", "content": expected.text}
    assert choice["finish_reason"] == expected.finish_reason
    assert answer["usage"]["prompt_tokens"] == len(ids)
    assert answer["usage"]["completion_tokens"] == len(expected.tokens)

    events = served.events("/v1/chat/completions", {"messages": messages, "max_tokens": 10})
    chunks = events[:-1]
    assert events[-1] == "[DONE]"
    assert {chunk["object"] for chunk in chunks} == {"chat.completion.chunk"}
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    text = "".join(chunk["choices"][0]["delta"].get("content", "") for chunk in chunks)
    assert text == expected.text
    assert chunks[-1]["choices"][0] == {"index": 0, "delta": {},
                                        "finish_reason": expected.finish_reason}


def test_n_choices_are_seeded_requests_of_the_engine(served):
    """`n` choices of a seeded request are the engine's requests with seeds
    `seed`, `seed + 1`, ...; usage counts the prompt once."""
    engine = served.engine
    ids = engine.tokenizer.encode("def decode(self, s):")[0]
    sampling = dict(max_new_tokens=8, temperature=1.5, seed=11)
    expected = [reference(engine, ids, **dict(sampling, seed=11 + i)) for i in range(3)]
    assert len({tuple(r.tokens) for r in expected}) > 1  # the choices differ
    body = {"prompt": ids, "n": 3, "max_tokens": 8, "temperature": 1.5, "seed": 11}
    status, answer = served.post("/v1/completions", body)
    assert status == 200, answer
    assert [c["index"] for c in answer["choices"]] == [0, 1, 2]
    assert [c["text"] for c in answer["choices"]] == [r.text for r in expected]
    assert answer["usage"]["prompt_tokens"] == len(ids)
    assert answer["usage"]["completion_tokens"] == sum(len(r.tokens) for r in expected)
    events = served.events("/v1/completions", body)
    texts = ["", "", ""]
    for chunk in events[:-1]:
        (choice,) = chunk["choices"]
        texts[choice["index"]] += choice["text"]
    assert texts == [r.text for r in expected]
    # The last seed of the range: choice 1 wraps to seed 0.
    status, answer = served.post("/v1/completions", dict(body, seed=2**63 - 1, n=2))
    assert status == 200, answer
    wrapped = reference(engine, ids, **dict(sampling, seed=0))
    assert answer["choices"][1]["text"] == wrapped.text
    wait_idle(engine)
    assert engine.stats()["free_blocks"] == engine.pool.capacity


def reference_logprobs(engine, ids, tokens):
    """numpy log-softmax of the model's full pass over `ids + tokens`, at
    the positions that chose each of `tokens`."""
    logits = np.asarray(keras.ops.convert_to_numpy(
        engine.model({"token_ids": np.array([ids + tokens[:-1]], "int32")})), "float64")[0]
    logits = logits[len(ids) - 1:]
    logits -= logits.max(axis=-1, keepdims=True)
    return logits - np.log(np.exp(logits).sum(axis=-1, keepdims=True))


def token_name(tokenizer, token):
    text = tokenizer.decode([token])
    return f"token_id:{token}" if "\ufffd" in text else text


def test_logprobs_are_the_models_log_softmax(served):
    """Completions' `logprobs: k` and chats' `logprobs`/`top_logprobs`:
    each token's log-probability and the k most likely tokens' equal a
    numpy log-softmax of the full pass's logits, sampled or greedy,
    streamed or not."""
    engine = served.engine
    tokenizer = engine.tokenizer
    ids = tokenizer.encode("def encode(self, o):")[0]
    body = {"prompt": ids, "max_tokens": 6, "temperature": 1.3, "seed": 5, "logprobs": 3}
    status, answer = served.post("/v1/completions", body)
    assert status == 200, answer
    expected = reference(engine, ids, max_new_tokens=6, temperature=1.3, seed=5)
    reference_lp = reference_logprobs(engine, ids, expected.tokens)
    logprobs = answer["choices"][0]["logprobs"]
    assert logprobs["tokens"] == [token_name(tokenizer, t) for t in expected.tokens]
    positions = np.arange(len(expected.tokens))
    np.testing.assert_allclose(logprobs["token_logprobs"],
                               reference_lp[positions, expected.tokens], atol=1e-4)
    for row, top in zip(reference_lp, logprobs["top_logprobs"]):
        best = np.argsort(-row)[:3]
        assert list(top) == [token_name(tokenizer, t) for t in best]
        np.testing.assert_allclose(list(top.values()), row[best], atol=1e-4)
    assert logprobs["text_offset"][0] == 0
    assert logprobs["text_offset"][-1] == len(tokenizer.decode(expected.tokens[:-1]))
    streamed = served.events("/v1/completions", body)[:-1]
    # The same seeded request again, its steps batched otherwise: equal to
    # float rounding.
    np.testing.assert_allclose(sum(((c["choices"][0].get("logprobs") or {}).get(
        "token_logprobs", []) for c in streamed), []), logprobs["token_logprobs"], atol=1e-4)

    messages = [{"role": "user", "content": "and decode it"}]
    status, answer = served.post("/v1/chat/completions", {
        "messages": messages, "max_tokens": 4, "logprobs": True, "top_logprobs": 2})
    assert status == 200, answer
    content = answer["choices"][0]["logprobs"]["content"]
    chat_ids = engine.submitted[-1].prompt
    tokens = engine.submitted[-1].tokens
    reference_lp = reference_logprobs(engine, chat_ids, tokens)
    assert [entry["token"] for entry in content] == [token_name(tokenizer, t) for t in tokens]
    np.testing.assert_allclose([entry["logprob"] for entry in content],
                               reference_lp[np.arange(len(tokens)), tokens], atol=1e-4)
    greedy_top = [entry["top_logprobs"][0]["logprob"] for entry in content]
    np.testing.assert_allclose(greedy_top, [entry["logprob"] for entry in content])
    for entry in content:
        whole = not entry["token"].startswith("token_id:")
        assert entry["bytes"] == (list(entry["token"].encode()) if whole else None)
    status, answer = served.post("/v1/chat/completions", {"messages": messages,
                                                          "max_tokens": 2})
    assert answer["choices"][0]["logprobs"] is None


def test_health_and_models(served):
    status, health = served.get("/health")
    assert status == 200 and health["status"] == "ok"
    assert health["blocks"] == served.engine.pool.capacity
    status, models = served.get("/v1/models")
    assert status == 200 and [m["id"] for m in models["data"]] == ["tiny_gpt2"]


BAD_REQUESTS = [
    # (endpoint, body, status, the parameter named, a piece of the message)
    ("completions", {"prompt": "a", "frequency_penalty": 0.5}, 400, "frequency_penalty",
     "frequency_penalty"),
    ("completions", {"prompt": "a", "temperature": -1}, 400, "temperature", "temperature"),
    ("completions", {"prompt": "a", "temperature": "hot"}, 400, "temperature", "a number"),
    ("completions", {"prompt": "a", "top_k": 0}, 400, "top_k", "top_k"),
    ("completions", {"prompt": "a", "max_tokens": 0}, 400, "max_tokens", "max_tokens"),
    ("completions", {"prompt": "a", "stream": "yes"}, 400, "stream", "stream"),
    ("completions", {"prompt": "a", "n": 0}, 400, "n", "`n` must be from 1 to 128"),
    ("completions", {"prompt": "a", "logprobs": 21}, 400, "logprobs", "from 0 to 20"),
    ("completions", {"prompt": "a", "logprobs": True}, 400, "logprobs", "an integer"),
    ("chat/completions", {"messages": [{"role": "user", "content": "a"}], "top_logprobs": 2},
     400, "top_logprobs", "needs `logprobs: true`"),
    ("completions", {"prompt": "a", "stream_options": {"include_usage": True}}, 400,
     "stream_options", "only read with stream: true"),
    ("completions", {"prompt": "a", "stream": True, "stream_options": {"include_usage": "yes"}},
     400, "stream_options", "must be true or false"),
    ("completions", {"prompt": "a", "stream": True, "stream_options": {"obfuscate": True}},
     400, "stream_options", "only field is include_usage"),
    ("completions", {"prompt": "a", "max_tokens": 1000}, 400, "max_tokens",
     "max_tokens=1000 make 1001 positions, above the engine's max_length=64"),
    ("completions", {"prompt": [5, 99999]}, 400, "prompt", "vocabulary"),
    ("completions", {"prompt": ["a", "b"]}, 400, "prompt", "prompt"),
    ("completions", {"prompt": []}, 400, "prompt", "prompt"),
    ("completions", {"max_tokens": 3}, 400, "prompt", "`prompt` is required"),
    ("completions", {"prompt": "a", "model": "gpt-4"}, 404, "model", "gpt-4"),
    ("completions", b"{\"prompt\": ", 400, None, "not valid JSON"),
    ("completions", b"[1, 2]", 400, None, "JSON object"),
    ("completions", b"\xff\xfe", 400, None, "not valid JSON"),
    ("completions", {"prompt": "a" * 5000}, 413, None, "4096"),
    ("chat/completions", {"messages": "hello"}, 400, "messages", "messages"),
    ("chat/completions", {"messages": [{"role": "user"}]}, 400, "messages", "messages[0]"),
    ("chat/completions", {"messages": [{"role": "user", "content": "a"}], "prompt": "a"}, 400,
     "prompt", "unknown field prompt"),
]


@pytest.mark.parametrize("endpoint, body, status, param, message", BAD_REQUESTS)
def test_a_bad_request_gets_a_4xx_naming_the_field(served, endpoint, body, status, param,
                                                   message):
    answer_status, answer = served.post(f"/v1/{endpoint}", body)
    assert answer_status == status, answer
    assert message in answer["error"]["message"]
    assert answer["error"]["param"] == param


def test_without_a_template_chats_are_refused_and_a_full_queue_gets_429(served, tmp_path):
    folder = write_folder(tmp_path, chat_template=None)
    assert ChatTemplate.from_folder(folder) is None
    engine = Engine(served.engine.model, max_batch=2, max_length=MAX_LENGTH, block_size=8,
                    tokenizer=served.engine.tokenizer)
    # max_waiting=0: every request finds the queue full; shutdown_timeout=0:
    # what runs at shutdown is cancelled.
    server = Server(create_app(engine, "plain", max_waiting=0, shutdown_timeout=0))
    try:
        status, answer = server.post("/v1/chat/completions",
                                     {"messages": [{"role": "user", "content": "hi"}]})
        assert status == 400 and "no chat template" in answer["error"]["message"]
        status, answer = server.post("/v1/completions", {"prompt": "a"})
        assert status == 429 and answer["error"]["type"] == "rate_limit_error"
        # Longer than shutting down takes: 6 requests of 56 steps, 2 at a time.
        running = [engine.submit([5, 6, 7, 8], max_new_tokens=56) for _ in range(6)]
    finally:
        server.stop()
    assert not engine.running
    assert all(request.finished for request in running)
    assert "cancelled" in {request.finish_reason for request in running}
    assert engine.stats()["free_blocks"] == engine.pool.capacity


def test_64_concurrent_clients_get_answers_and_every_block_comes_back(served):
    """Mixed prompt lengths and budgets; a third streams, a sixth streams
    and hangs up after its first event. Every other answer equals the
    engine's for the same request, and after it all the pool is free."""
    engine = served.engine
    rng = np.random.default_rng(0)
    vocab = engine.forward.vocab_size
    jobs = []
    for index in range(64):
        prompt = rng.integers(3, vocab, size=int(rng.integers(1, 30))).tolist()
        mode = ("hang_up", "stream", "stream", "plain", "plain", "plain")[index % 6]
        budget = MAX_LENGTH - len(prompt) if mode == "hang_up" else int(rng.integers(1, 20))
        jobs.append((prompt, budget, mode))
    answers = [None] * len(jobs)
    start = len(engine.submitted)

    def client(index):
        prompt, budget, mode = jobs[index]
        body = {"prompt": prompt, "max_tokens": budget}
        if mode == "plain":
            status, answer = served.post("/v1/completions", body)
            assert status == 200, answer
            answers[index] = (answer["choices"][0]["text"], answer["choices"][0]["finish_reason"],
                              answer["usage"]["completion_tokens"])
        elif mode == "stream":
            events = served.events("/v1/completions", body)
            assert events[-1] == "[DONE]"
            text = "".join(chunk["choices"][0]["text"] for chunk in events[:-1])
            answers[index] = (text, events[-2]["choices"][0]["finish_reason"], None)
        else:
            served.events("/v1/completions", body, keep=1)
            answers[index] = "hung up"

    threads = [threading.Thread(target=client, args=(i,)) for i in range(len(jobs))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert all(answer is not None for answer in answers), answers
    wait_idle(engine)
    stats = engine.stats()
    assert stats["free_blocks"] == stats["blocks"] == engine.pool.capacity
    engine.pool.check()
    requests = engine.submitted[start:]
    assert len(requests) == len(jobs)
    # Greedy answers do not depend on the batch: the engine's own answers.
    # A client that hangs up ends its request one way or another (cancelled
    # when it was still running: test_a_client_that_hangs_up_cancels_it).
    assert all(r.finished for r in requests)
    kept = [(job, answer) for job, answer in zip(jobs, answers) if job[2] != "hang_up"]
    alone = [engine.submit(prompt, SamplingParams(max_new_tokens=budget))
             for (prompt, budget, _), _ in kept]
    for expected, (_, answer) in zip(alone, kept):
        expected.result(60)
        assert answer[0] == expected.text
        assert answer[1] == expected.finish_reason
        assert answer[2] in (None, len(expected.tokens))


def test_a_client_that_hangs_up_cancels_its_request(served):
    engine = served.engine
    for body in ({"prompt": [7, 8], "max_tokens": 60},
                 {"messages": [{"role": "user", "content": "x"}], "max_tokens": 50}):
        path = "/v1/chat/completions" if "messages" in body else "/v1/completions"
        served.events(path, body, keep=1)
        request = engine.submitted[-1]
        closed = len(request.tokens)
        wait_idle(engine)
        assert request.finish_reason == "cancelled", (
            path, request.finish_reason, closed, len(request.tokens))
        assert len(request.tokens) < body["max_tokens"]
        assert engine.stats()["free_blocks"] == engine.pool.capacity
    # Without streaming: the client sends its request and goes away.
    count = len(engine.submitted)
    connection = served.connection()
    connection.request("POST", "/v1/completions",
                       json.dumps({"prompt": [7, 9], "max_tokens": 60}).encode())
    for _ in range(600):
        if len(engine.submitted) > count:
            break
        time.sleep(0.01)
    connection.sock.shutdown(socket.SHUT_RDWR)
    connection.close()
    request = engine.submitted[-1]
    wait_idle(engine)
    assert request.finish_reason == "cancelled", (request.finish_reason, len(request.tokens))
    assert engine.stats()["free_blocks"] == engine.pool.capacity


def test_the_command_line_passes_its_options_to_serve(monkeypatch):
    calls = []
    monkeypatch.setattr(server_module, "serve", lambda *args, **kwargs: calls.append((args, kwargs)))
    status = keras_attn_cli.main(["serve", "some/folder", "--port", "8123", "--max-batch", "3",
                                  "--max-length", "96", "--block-size", "4", "--num-blocks", "50"])
    assert status == 0
    (args, kwargs), = calls
    assert args == ("some/folder",)
    expected = {"host": "127.0.0.1", "port": 8123, "max_batch": 3, "max_length": 96,
                "block_size": 4, "num_blocks": 50, "warm_up": True}
    assert {key: kwargs[key] for key in expected} == expected
    keras_attn_cli.main(["serve", "some/folder", "--no-warm-up"])
    assert calls[-1][1]["warm_up"] is False
    with pytest.raises(SystemExit) as exit:
        keras_attn_cli.main(["serve", "some/folder", "--port", "eighty"])
    assert exit.value.code == 2


def test_shutdown_lets_a_request_in_flight_finish(served):
    """Last in the file: stops the module's server while a stream runs."""
    engine = served.engine
    first = threading.Event()
    answer = {}

    def client():
        connection = served.connection()
        connection.request("POST", "/v1/completions", json.dumps(
            {"prompt": [7], "max_tokens": 40, "stream": True}).encode())
        response = connection.getresponse()
        events = []
        for line in response:
            if line.startswith(b"data: "):
                events.append(line[6:].strip())
                first.set()
        answer["events"] = events

    thread = threading.Thread(target=client)
    thread.start()
    assert first.wait(60)
    served.stop()
    thread.join(60)
    events = answer["events"]
    assert events[-1] == b"[DONE]"
    assert json.loads(events[-2])["choices"][0]["finish_reason"] in ("length", "stop")
    assert not served.thread.is_alive()
    assert not engine.running
    assert engine.stats()["free_blocks"] == engine.pool.capacity


def test_a_template_that_refuses_the_messages_is_a_value_error():
    template = ChatTemplate(
        "{% if messages[0]['role'] == 'system' %}{{ raise_exception('no system role') }}"
        "{% endif %}{{ bos_token }}{{ messages[0]['content'] | tojson }}",
        {"bos_token": "<s>"},
    )
    assert template.render([{"role": "user", "content": "é"}]) == '<s>"é"'
    with pytest.raises(ValueError, match="no system role"):
        template.render([{"role": "system", "content": "x"}])
    with pytest.raises(ValueError, match="does not parse"):
        ChatTemplate("{% for %}")
