"""The serving engine (`keras_attn.serving.Engine`): under continuous
batching over the paged cache, each request's greedy tokens equal what
`model.generate` gives it (every registered `lm` variant), seeded sampling
does not depend on the batch, and every block comes back."""

import keras
import numpy as np
import pytest

import keras_attn

from keras_attn.models import VARIANTS
from keras_attn.serving import Engine
from keras_attn.serving import engine as engine_module
from keras_attn.serving import SamplingParams
from tests.models.test_variants import CONFIG
from tests.models.test_variants import VARIANT_FIELDS
from tests.models.test_variants import build

BACKEND = keras.config.backend()
LM_VARIANTS = [name for name, cls in VARIANTS.items() if "lm" in cls.applications]
# The bookkeeping is the same host code on every backend; the step program
# is what differs. Every variant on torch (eager steps), three walks on the
# XLA backends (about 4 s of compiling each): learned positions with a
# tied head, rotary grouped-query attention with windows, a distance bias.
# Phi-3's LongRoPE (original length 5) switches to its long factors inside
# the short prompts' generation and from the start of the long prompts'.
SERVED = [
    name for name in LM_VARIANTS
    if BACKEND == "torch" or name in ("gpt2", "gemma2", "alibi")
]
rng = np.random.default_rng(1)
PROMPTS = [rng.integers(4, 30, size=n).tolist() for n in (3, 9, 5, 12, 1)]
STEPS = [6, 4, 7, 9, 5]


def model_for(variant):
    keras.utils.set_random_seed(0)
    return build(variant, "lm", initializer_range=0.3, max_position_embeddings=40)


def alone(model, prompts, steps, monkeypatch):
    """Each prompt's greedy tokens from `model.generate` (rows of one call
    are independent: tests/models/test_variants.py)."""
    monkeypatch.setenv("KERAS_ATTN_TORCH_COMPILE", "0")
    tokens = np.asarray(model.generate(prompts, max(steps)))
    return [row[:n].tolist() for row, n in zip(tokens, steps)]


@pytest.mark.parametrize("variant", SERVED)
def test_greedy_tokens_equal_generating_alone(variant, monkeypatch):
    """Requests arrive at different steps into 3 rows: rows are reused, a
    prompt is encoded in chunks of 4 while others decode, and shared
    prompt blocks (the last two prompts start as the sixth) are read by
    several requests. Where the model packs, prompts that fit in one chunk
    are encoded in one pass: the first two with no row decoding, the
    two-token one after the 9-token prompt's last chunk beside the rows."""
    model = model_for(variant)
    prompts = [PROMPTS[4], PROMPTS[0], PROMPTS[1], [11, 12], PROMPTS[2], PROMPTS[3],
               PROMPTS[3][:9] + [5, 6], PROMPTS[3][:8] + [7]]
    steps = [5, 6, 4, 3, 7, 9, 3, 2]
    engine = Engine(model, max_batch=3, block_size=4, prefill_chunk=4, end_token_ids=[])
    arrivals = [0, 3, 0, 1, 0, 6, 0, 1]  # steps run after each submission
    requests = []
    for prompt, n, wait in zip(prompts, steps, arrivals):
        requests.append(engine.submit(prompt, max_new_tokens=n))
        for _ in range(wait):
            engine.step()
            engine.pool.check()
    engine.run()
    expected = alone(model, prompts, steps, monkeypatch)
    assert [r.tokens for r in requests] == expected
    # Where the model allows, prompt chunks ran packed with the decoding rows.
    assert (engine.stats()["packed_steps"] > 0) == engine.packs
    assert {r.finish_reason for r in requests} == {"length"}
    if engine.recompute_length is None:
        assert engine.pool.shared_lent >= 2  # both later prompts shared blocks
    else:  # LongRoPE rewrites a row's blocks: none are shared
        assert engine.pool.shared_lent == 0
    engine.pool.check()
    assert engine.stats()["free_blocks"] == engine.pool.capacity


@pytest.mark.parametrize("variant", ["llama"] if BACKEND == "torch" else [])
def test_sink_tokens_beside_a_window_equal_generating_alone(variant, monkeypatch):
    """StreamingLLM's sink tokens are each row's own first positions, though
    rows join at different clocks; prompts longer than the window of 4."""
    keras.utils.set_random_seed(0)
    model = build(variant, "lm", initializer_range=0.3, max_position_embeddings=40,
                  attention_window=4, attention_sink_tokens=2)
    prompts, steps = PROMPTS[1:4], [7, 5, 6]
    engine = Engine(model, max_batch=2, block_size=4, prefill_chunk=4, end_token_ids=[])
    requests = [engine.submit(prompts[0], max_new_tokens=steps[0])]
    for _ in range(3):
        engine.step()
    requests += [engine.submit(p, max_new_tokens=n) for p, n in zip(prompts[1:], steps[1:])]
    engine.run()
    assert [r.tokens for r in requests] == alone(model, prompts, steps, monkeypatch)
    engine.pool.check()


def compiled_graphs():
    """How many graphs torch.compile has made in this process (0 elsewhere)."""
    if BACKEND != "torch":
        return 0
    from torch._dynamo.utils import counters

    return counters["stats"]["unique_graphs"]


def warmed_up(engine):
    """On torch (eager programs, built at once) the engine's programs after
    `warm_up`, which the requests then must not add to; None elsewhere,
    where warming up would compile programs the test does not use."""
    if BACKEND != "torch":
        return None
    engine.warm_up()
    return dict(engine.programs.compiled)


def served_with_preemptions(engine, prompts, steps):
    """The tokens `engine`, whose pool is too small for its rows, gives
    `prompts` (`steps` new tokens each): some request is preempted, the
    blocks add up after every step and are all free at the end."""
    requests = [engine.submit(p, max_new_tokens=n) for p, n in zip(prompts, steps)]
    while engine.busy:
        engine.step()
        engine.pool.check()
    assert engine.stats()["preemptions"] > 0
    assert engine.stats()["free_blocks"] == engine.pool.capacity
    return [r.tokens for r in requests]


UNILM_VARIANTS = [
    name for name, cls in VARIANTS.items()
    if "unilm" in cls.applications and (BACKEND == "torch" or name == "roformer")
]


@pytest.mark.parametrize("variant", UNILM_VARIANTS)
def test_unilm_greedy_tokens_equal_generating_alone(variant, monkeypatch):
    """A UniLM prompt is a source its tokens see whole: sources longer than
    a prefill chunk (encoded in one pass of two chunks' width) and shorter,
    arriving while others decode; two share their first block, which must
    not be shared (its keys see the rest of each source)."""
    keras.utils.set_random_seed(0)
    # Two blocks: a source encoded in two chunks would differ from the
    # second block on (the first chunk's hidden states miss the second's).
    layers = {} if "num_hidden_layers" in VARIANT_FIELDS.get(variant, {}) else {
        "num_hidden_layers": 2}
    model = build(variant, "unilm", initializer_range=0.3, max_position_embeddings=40, **layers)
    prompts = [PROMPTS[3], PROMPTS[1], PROMPTS[3][:5] + [7, 8], PROMPTS[2]]
    steps = [5, 6, 4, 3]
    engine = Engine(model, max_batch=2, block_size=4, prefill_chunk=8, end_token_ids=[])
    programs = warmed_up(engine)
    requests = [engine.submit(prompts[0], max_new_tokens=steps[0])]
    engine.step()
    requests += [engine.submit(p, max_new_tokens=n) for p, n in zip(prompts[1:], steps[1:])]
    engine.run()
    assert programs is None or engine.programs.compiled == programs
    expected = alone(model, prompts, steps, monkeypatch)
    assert [r.tokens for r in requests] == expected
    assert engine.pool.shared_lent == 0
    engine.pool.check()
    assert engine.stats()["free_blocks"] == engine.pool.capacity
    # Blocks lent as requests grow: on a pool too small for both rows a
    # request is preempted and encodes its source and generated tokens again
    # in one pass, the generated ones as its second segment.
    tight = Engine(model, max_batch=2, block_size=1, num_blocks=20, prefill_chunk=8,
                   end_token_ids=[])
    assert served_with_preemptions(tight, prompts, steps) == expected


SEQ2SEQ_VARIANTS = [
    name for name, cls in VARIANTS.items()
    if "seq2seq" in cls.applications and (BACKEND == "torch" or name == "t5")
]


@pytest.mark.parametrize("variant", SEQ2SEQ_VARIANTS)
def test_seq2seq_greedy_tokens_equal_generating_alone(variant, monkeypatch):
    """An encoder-decoder's prompt is its source, encoded once when its
    request starts; each decoding row reads its own request's source (rows
    are reused by later requests with other sources)."""
    keras.utils.set_random_seed(0)
    model = build(variant, "seq2seq", initializer_range=0.3)
    prompts = [PROMPTS[3], PROMPTS[1], PROMPTS[0], PROMPTS[2]]
    steps = [5, 6, 4, 3]
    engine = Engine(model, max_batch=2, block_size=4, prefill_chunk=4, end_token_ids=[],
                    max_length=16)
    programs = warmed_up(engine)
    requests = [engine.submit(prompts[0], max_new_tokens=steps[0])]
    engine.step()
    requests += [engine.submit(p, max_new_tokens=n) for p, n in zip(prompts[1:], steps[1:])]
    engine.run()
    assert programs is None or engine.programs.compiled == programs
    expected = alone(model, prompts, steps, monkeypatch)
    assert [r.tokens for r in requests] == expected
    engine.pool.check()
    assert engine.stats()["free_blocks"] == engine.pool.capacity
    # Blocks lent as the decoder grows: on a pool too small for both rows a
    # request is preempted, keeps its encoded source, and encodes its decoder
    # tokens again.
    tight = Engine(model, max_batch=2, block_size=1, num_blocks=10, prefill_chunk=4,
                   end_token_ids=[], max_length=16)
    assert served_with_preemptions(tight, prompts, steps) == expected


def test_a_model_it_cannot_serve_is_refused():
    """LongRoPE in bfloat16 attention (the rows' lengths travel in the
    step's float32 tables, which Keras would round), conditional norms
    (no request gives a condition), ReRoPE (clipped distances)."""
    previous = keras.config.dtype_policy()
    keras.config.set_dtype_policy("mixed_bfloat16")
    try:
        mixed = model_for("phi3")
    finally:
        keras.config.set_dtype_policy(previous)
    with pytest.raises(ValueError, match="longrope.*computes in bfloat16"):
        Engine(mixed)
    conditional = keras_attn.build_transformer_model(
        CONFIG, variant="gpt2", application="lm", conditional_layer_norm=3,
        conditional_layer_norm_hidden_size=4,
    )
    with pytest.raises(ValueError, match="conditional_layer_norm"):
        Engine(conditional)
    rerope = build("roformer", "lm", rope_scaling={"rope_type": "rerope", "window": 4})
    with pytest.raises(ValueError, match="rerope"):
        Engine(rerope)


@pytest.fixture(scope="module")
def gpt2():
    """The model of the engine's bookkeeping tests. That bookkeeping is host
    code, the same on every backend; on TensorFlow, where each new engine
    compiles its two programs for about 5 s, the greedy cases above cover
    the programs, so these run on JAX and torch."""
    if BACKEND == "tensorflow":
        pytest.skip("the engine's bookkeeping is tested on JAX and torch")
    return model_for("gpt2")


def test_the_prompt_chunk_grows_with_the_rows_and_a_bad_one_is_refused(gpt2):
    """4 prompt tokens per row by default, at least 32; a value of the
    caller is kept, and one that is not a positive integer is refused."""
    assert [Engine(gpt2, max_batch=n).prefill_chunk for n in (1, 8, 9, 16)] == [32, 32, 36, 64]
    assert Engine(gpt2, max_batch=16, prefill_chunk=8).prefill_chunk == 8
    for bad in (0, 2.0, True):
        with pytest.raises(ValueError, match="`prefill_chunk` must be an integer >= 1"):
            Engine(gpt2, prefill_chunk=bad)


def test_seeded_sampling_does_not_depend_on_the_batch(gpt2):
    params = SamplingParams(max_new_tokens=8, temperature=0.9, top_k=12, top_p=0.9,
                            min_p=0.05, repetition_penalty=1.3, seed=7)
    engine = Engine(gpt2, max_batch=3, block_size=4, prefill_chunk=4, end_token_ids=[])
    alone_tokens = engine.submit(PROMPTS[1], params).result()
    crowd = [engine.submit(p, max_new_tokens=5, temperature=1.0) for p in PROMPTS[:2]]
    again = engine.submit(PROMPTS[1], params)
    crowd.append(engine.submit(PROMPTS[2], max_new_tokens=9, temperature=1.0, seed=3))
    engine.run()
    assert again.tokens == alone_tokens
    # The same request unseeded, or with another seed, draws otherwise.
    other = engine.submit(PROMPTS[1], SamplingParams(**{**params.__dict__, "seed": 8})).result()
    assert other != alone_tokens


def test_end_tokens_and_cancellation_free_their_blocks(gpt2, monkeypatch):
    [greedy] = alone(gpt2, [PROMPTS[0]], [6], monkeypatch)
    engine = Engine(gpt2, max_batch=2, block_size=4, prefill_chunk=4)
    ended = engine.submit(PROMPTS[0], max_new_tokens=6, end_token_ids=[greedy[2]])
    cancelled = engine.submit(PROMPTS[1], max_new_tokens=6)
    waiting = engine.submit(PROMPTS[2], max_new_tokens=6)
    engine.step()
    cancelled.cancel()
    waiting.cancel()
    engine.run()
    assert ended.tokens == greedy[:greedy.index(greedy[2]) + 1]
    assert ended.finish_reason == "stop"
    assert cancelled.finish_reason == waiting.finish_reason == "cancelled"
    engine.pool.check()
    assert engine.stats()["free_blocks"] == engine.pool.capacity


def test_a_row_freed_between_steps_is_taken_before_the_step_decodes(gpt2, monkeypatch):
    """A request encoded while both rows decode waits for a row; when a
    row's request is cancelled between steps, the next step gives it the
    row before decoding, while another prompt is still being encoded (a
    packed step): it decodes in that step, and its tokens are its own.
    (Admission waits for a row to be due, so the test admits as if both
    were: a request encoded again by LongRoPE, whose row another took,
    waits the same way.)"""
    engine = Engine(gpt2, max_batch=2, block_size=4, prefill_chunk=4, end_token_ids=[])
    monkeypatch.setattr(engine, "_rows_due", lambda steps: engine.max_batch)
    first = engine.submit(PROMPTS[0], max_new_tokens=20)
    second = engine.submit(PROMPTS[4], max_new_tokens=20)
    engine.step()
    engine.step()
    assert first.row is not None and second.row is not None
    ready = engine.submit(PROMPTS[2][:3], max_new_tokens=5)
    engine.submit(PROMPTS[3], max_new_tokens=5)  # three chunks to encode
    engine.step()
    assert len(ready.tokens) == 1 and ready.row is None  # encoded, no free row
    first.cancel()
    engine.step()
    assert engine.stats()["packed_steps"] == 3
    assert len(ready.tokens) == 2
    engine.run()
    assert ready.tokens == alone(gpt2, [PROMPTS[2][:3]], [5], monkeypatch)[0]
    assert engine.stats()["free_blocks"] == engine.pool.capacity


def test_prompts_packed_in_one_chunk_compute_what_they_compute_apart(gpt2, monkeypatch):
    """Three prompts submitted together fit in one chunk of 8 and are
    encoded in one pass: each generated token's log-probability equals
    that of the same request whose prompt had a pass of its own."""
    def serve():
        engine = Engine(gpt2, max_batch=3, block_size=4, prefill_chunk=8, end_token_ids=[])
        requests = [engine.submit(prompt, max_new_tokens=4, logprobs=0)
                    for prompt in (PROMPTS[0], PROMPTS[4], [11, 12, 13])]
        engine.run()
        return engine.stats()["packed_steps"], requests

    packed_steps, packed = serve()
    monkeypatch.setattr(engine_module, "PACKED_PROMPTS", 1)
    apart_steps, apart = serve()
    # One pass for the three prompts; apart, the first alone, the others
    # each packed with the rows then decoding.
    assert (packed_steps, apart_steps) == (1, 2)
    for one, other in zip(packed, apart):
        assert one.tokens == other.tokens
        np.testing.assert_allclose([t.logprob for t in one.logprobs],
                                   [t.logprob for t in other.logprobs], atol=1e-5)


def test_a_prompt_is_encoded_when_a_row_will_be_free_for_it(gpt2, monkeypatch):
    """While both rows decode, a waiting request is encoded in the step
    the first row frees, not before (its first token would then wait for
    a row) and not after (the row would sit idle): from its first token on
    it gets one token a step."""
    engine = Engine(gpt2, max_batch=2, block_size=4, prefill_chunk=4, end_token_ids=[])
    first = engine.submit(PROMPTS[0], max_new_tokens=10)
    engine.submit(PROMPTS[4], max_new_tokens=20)
    engine.step()
    engine.step()
    waiting = engine.submit(PROMPTS[3], max_new_tokens=6)  # three chunks to encode
    counts = []
    while not waiting.finished:
        engine.step()
        counts.append((first.finished, len(waiting.tokens)))
    freed = [finished for finished, _ in counts].index(True)
    assert [n for _, n in counts] == [0] * freed + list(range(1, 7)), counts
    engine.run()
    assert waiting.tokens == alone(gpt2, [PROMPTS[3]], [6], monkeypatch)[0]


def test_a_request_waits_for_blocks_and_a_too_long_one_is_refused(gpt2, monkeypatch):
    # Four blocks of 4: the first prompt and its first new token take
    # three, the second prompt's two do not fit until the first ends.
    engine = Engine(gpt2, max_batch=3, block_size=4, num_blocks=5, prefill_chunk=4,
                    end_token_ids=[], max_length=16)
    first = engine.submit(PROMPTS[1], max_new_tokens=7)
    second = engine.submit(PROMPTS[2], max_new_tokens=9)
    engine.step()
    assert engine.stats()["waiting"] == 1
    engine.run()
    assert [first.tokens, second.tokens] == alone(gpt2, [PROMPTS[1], PROMPTS[2]], [7, 9],
                                                  monkeypatch)
    with pytest.raises(ValueError, match="max_length=16"):
        engine.submit(PROMPTS[3], max_new_tokens=5)
    with pytest.raises(ValueError, match="needs 4 blocks"):
        Engine(gpt2, block_size=4, num_blocks=4, max_length=16).submit([5] * 4, max_new_tokens=10)
    for bad, message in (([], "empty"), ([5, 99], "outside the vocabulary")):
        with pytest.raises(ValueError, match=message):
            engine.submit(bad, max_new_tokens=2)


def test_block_accounting_after_any_mix_of_requests(gpt2):
    """A random mix of requests (some cancelled while waiting, encoding or
    decoding, some ending early) on a pool too small for all of them: the
    accounting holds after every step, the rows' tables never overlap
    except for shared prompt blocks, and every block is free at the end."""
    engine = Engine(gpt2, max_batch=3, block_size=2, num_blocks=12, prefill_chunk=3,
                    max_length=20)
    draw = np.random.default_rng(3)
    requests = []
    for step in range(60):
        if draw.random() < 0.4:
            prompt = draw.integers(4, 30, size=draw.integers(1, 9)).tolist()
            if draw.random() < 0.3 and requests:  # a shared prompt start
                prompt = requests[-1].prompt[:6] + prompt[:2]
            requests.append(engine.submit(prompt, max_new_tokens=int(draw.integers(1, 8)),
                                          end_token_ids=[int(draw.integers(4, 30))]))
        if draw.random() < 0.15 and requests:
            requests[draw.integers(len(requests))].cancel()
        engine.step()
        engine.pool.check()
        holding = [r for r in requests if r.table is not None]
        for i, first in enumerate(holding):
            for second in holding[:i]:
                for block in set(first.table) & set(second.table):
                    # Only a block of the same prompt tokens, at the same
                    # place, before each prompt's last token.
                    index = first.table.index(block)
                    end = (index + 1) * 2
                    assert second.table.index(block) == index
                    assert end < min(len(first.prompt), len(second.prompt))
                    assert first.prompt[:end] == second.prompt[:end]
    engine.run()
    assert all(r.finished for r in requests)
    engine.pool.check()
    assert engine.stats()["free_blocks"] == engine.pool.capacity


def test_an_engine_thread_streams_each_request(gpt2, monkeypatch):
    """On torch, the starting thread's OpenMP workers are handed back
    first (tests/torch_runtime/test_openmp.py tests the handing back)."""
    released = []
    monkeypatch.setattr(engine_module, "release_thread_pool", lambda: released.append(True))
    engine = Engine(gpt2, max_batch=2, block_size=4, prefill_chunk=4, end_token_ids=[])
    engine.start()
    try:
        requests = [engine.submit(p, max_new_tokens=n) for p, n in zip(PROMPTS[:4], STEPS)]
        streamed = [[t for delta in request for t in delta.tokens] for request in requests]
    finally:
        engine.stop()
    assert streamed == alone(gpt2, PROMPTS[:4], STEPS[:4], monkeypatch)
    assert released == ([True] if BACKEND == "torch" else [])


class Bytes:
    def decode(self, ids):
        return bytes(ids).decode("utf-8", errors="replace")


def test_a_stop_string_ends_the_request_and_is_cut_from_its_text(gpt2, monkeypatch):
    [greedy] = alone(gpt2, [PROMPTS[2]], [10], monkeypatch)
    engine = Engine(gpt2, max_batch=2, block_size=4, prefill_chunk=4, tokenizer=Bytes(),
                    end_token_ids=[])
    # The stop string: the text of generated tokens 3 and 4.
    stop = Bytes().decode(greedy[3:5])
    request = engine.submit(PROMPTS[2], max_new_tokens=10, stop=["\x7f", stop])
    deltas = list(request)
    first = next(i for i in range(10) if stop in Bytes().decode(greedy[:i + 1]))
    assert request.tokens == greedy[:first + 1]
    assert request.finish_reason == "stop" and deltas[-1].finish_reason == "stop"
    text = Bytes().decode(greedy[:first + 1])
    assert request.text == text[:text.find(stop)]
    assert "".join(d.text for d in deltas) == request.text
    plain = engine.submit(PROMPTS[2], max_new_tokens=10)
    assert "".join(d.text for d in plain) == Bytes().decode(greedy) == plain.text


def test_warm_up_builds_every_program_before_any_request(gpt2, monkeypatch):
    """After `warm_up`, serving requests of every length up to `max_length`
    (from the engine's thread) builds no program and compiles nothing, and
    their tokens are what they are without it (the warm-up wrote only the
    scratch block). On torch the programs are
    compiled by `torch.compile`, which the tokens check against the eager
    `generate`."""
    # Windows 4, 8 and 16, and the prompt chunk; on torch, where each
    # compiles for seconds, one window of 16. Under the `auto` rule,
    # serving would compile later; `warm_up` compiles at once.
    block_size = 4
    if BACKEND == "torch":
        monkeypatch.setenv("KERAS_ATTN_TORCH_COMPILE", "auto")
        block_size = 16
    engine = Engine(gpt2, max_batch=2, block_size=block_size, prefill_chunk=4, max_length=16,
                    end_token_ids=[])
    before = compiled_graphs()
    engine.warm_up()
    programs = dict(engine.programs.compiled)
    # Windows, a prompt chunk, and (GPT-2 packs) the chunk packed with
    # decoding at each window.
    assert engine.packs
    assert len(programs) == {4: 7, 16: 3}[block_size]
    if BACKEND == "torch":  # compiled, not fallen back to eager steps
        steps_run = [program.compiled_step for program in programs.values()]
        assert all(s.mode == "always" and s.failure is None for s in steps_run)
        # One graph each, compiled on the CPU from the program's recording
        # (its second call, which warm_up makes).
        assert compiled_graphs() - before == len(programs)
        assert all(getattr(s.compiled, "refused", None) is None for s in steps_run)
    engine.pool.check()
    graphs = compiled_graphs()
    prompts, steps = [PROMPTS[3], PROMPTS[0], PROMPTS[4]], [4, 13, 15]
    # Served from the engine's thread: its programs were compiled in this one.
    engine.start()
    try:
        requests = [engine.submit(p, max_new_tokens=n) for p, n in zip(prompts, steps)]
        for request in requests:
            request.result(60)
    finally:
        engine.stop()
    assert engine.programs.compiled == programs
    assert compiled_graphs() == graphs
    assert [r.tokens for r in requests] == alone(gpt2, prompts, steps, monkeypatch)
    assert engine.stats()["free_blocks"] == engine.pool.capacity
    busy = Engine(gpt2, max_batch=2, block_size=block_size, max_length=16)
    busy.submit(PROMPTS[0], max_new_tokens=2)
    with pytest.raises(RuntimeError, match="before any request"):
        busy.warm_up()


def test_a_preempted_request_gives_the_tokens_it_gives_alone(gpt2, monkeypatch):
    """Blocks are lent as requests grow: on a pool too small for the rows'
    whole lengths the latest admitted request is preempted (its blocks
    freed) and, admitted again, encodes its prompt and generated tokens
    again; every request's greedy tokens still equal `generate`'s, and
    seeded sampling draws the same tokens."""
    prompts = [PROMPTS[3], PROMPTS[1], PROMPTS[0], PROMPTS[2]]
    steps = [9, 12, 13, 10]
    # Room for one request of 21 positions and a few blocks more.
    engine = Engine(gpt2, max_batch=3, block_size=2, num_blocks=16, prefill_chunk=4,
                    max_length=24, end_token_ids=[])
    requests = [engine.submit(p, max_new_tokens=n) for p, n in zip(prompts, steps)]
    seeded = SamplingParams(max_new_tokens=12, temperature=1.0, top_k=8, seed=5)
    sampled = engine.submit(PROMPTS[1], seeded)
    while engine.busy:
        engine.step()
        engine.pool.check()
    assert engine.stats()["preemptions"] > 0
    assert [r.tokens for r in requests] == alone(gpt2, prompts, steps, monkeypatch)
    assert {r.finish_reason for r in requests} == {"length"}
    roomy = Engine(gpt2, max_batch=3, block_size=2, prefill_chunk=4, max_length=24)
    assert roomy.submit(PROMPTS[1], seeded).result() == sampled.tokens
    assert roomy.stats()["preemptions"] == 0
    assert engine.stats()["free_blocks"] == engine.pool.capacity


def test_a_generated_pad_id_stays_padding_when_encoded_again(monkeypatch):
    """A BERT decoder hides pad ids' keys; a request encoded again from its
    start (preempted) marks its generated pad ids as padding, the last one
    too (no decoding step has seen it), so later tokens attend as `generate`
    lets them."""
    model = model_for("bert")
    bias = next(v for v in model.weights if v.path == "MLM-Bias/bias")
    bias.assign(np.where(np.arange(bias.shape[0]) == 0, 50.0, 0.0).astype("float32"))
    engine = Engine(model, max_batch=1, block_size=4, prefill_chunk=4, end_token_ids=[])
    request = engine.submit(PROMPTS[1], max_new_tokens=6)
    while len(request.tokens) < 2:
        engine.step()
    assert request.tokens == [0, 0]
    engine._preempt(request)
    prompt = len(PROMPTS[1])
    assert not request.real[prompt:prompt + 2].any() and request.real[:prompt].all()
    engine.run()
    assert request.tokens == alone(model, [PROMPTS[1]], [6], monkeypatch)[0]
