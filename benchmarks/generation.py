"""Cached generation against uncached decoding and keras-hub's GPT-2, and the windowed cache.

In one process, on the backend KERAS_BACKEND selects, with random weights in
float32, this measures:

1. BERT-base shape (12 layers, hidden 768, 12 heads, FFN 3072, vocabulary
   30522, `application="lm"`), batch 8, prompts of 32 tokens, 256 new
   tokens:
   - cached: `TransformerModel.generate`, greedy and top-p (p=0.9): one
     compiled XLA loop on TensorFlow and JAX, a Python loop on torch;
   - uncached, as bert4keras decodes: at every step the full pass over the
     prefix, then the argmax at each row's last real position, in a Python
     loop. Made fair: the full pass is jit-compiled (TensorFlow, JAX) at one
     padded width, 32 + 256 = 288, so it compiles once; the argmax runs
     inside the compiled function. With `--uncached loop` the 256 steps run
     for real; with `--uncached estimate` (the default on CPU, where the loop
     takes too long) one step is timed at prefix lengths 32, 96, 160, 224,
     288 and the per-step times are interpolated linearly and summed over
     the 256 steps. The estimate is also given for a growing prefix (the
     full pass at the prefix's own width, what bert4keras computes in
     graph mode, a compilation per width under XLA): the cheaper, harder
     baseline.
   - keras-hub's `GPT2CausalLM.generate` (`GPT2Backbone` of the same depth,
     width, heads, FFN and vocabulary; preprocessor off, prompts right-padded
     to 288 with a padding mask, `stop_token_ids=None`), greedy and
     `keras_hub.samplers.TopPSampler(p=0.9)`.
   Cached and keras-hub take turns within each repetition
   (`bert_base.timed_side_by_side`); tokens per second count new tokens
   (batch x 256) over the whole call, prompt encoding included.
2. The windowed cache: a smaller model (4 layers, hidden 256, 4 heads, FFN
   1024, vocabulary 8192, variant "alibi": no position table, so no length
   limit) with `attention_window=512`, batch 8, prompt 32, generating 1k to
   16k tokens greedily: time per step and per token, the bytes of the
   caches the loop allocates (`CachedForward.capacity` and `empty_cache`),
   the growth of the process's peak RSS on CPU, and on a GPU the device's
   peak memory. The window part runs first, so the BERT-base part does not
   set the process's peaks.
3. Pretrained shapes, greedy, batch 8 (`--batch`), prompts (T5: sources) of 32 tokens,
   256 new tokens (`--new-tokens`), random weights in float32, every
   generator made to run all the steps (no end token):
   - GPT-2 small (`--parts gpt2`: 12 layers, hidden 768, 12 heads, FFN
     3072, vocabulary 50257): one random `transformers.GPT2LMHeadModel`,
     saved with `save_pretrained`; keras_attn builds its model from that
     directory and keras-hub its `GPT2Backbone` (`from_preset` on the
     directory), so the three run the same weights. keras_attn's
     `generate` against keras-hub's `GPT2CausalLM.generate` (preprocessor
     off, prompts right-padded with a padding mask, as in part 1) and, on
     torch, against transformers' `generate` (`use_cache=True`; on a GPU
     also with `cache_implementation="static"`, its fastest eager setting).
   - T5-small (`--parts t5`: 6 + 6 layers, d_model 512, 8 heads, d_kv 64,
     d_ff 2048, ReLU, vocabulary 32128): one random
     `transformers.T5ForConditionalGeneration`, saved, keras_attn built from
     its directory; keras-hub's `T5Seq2SeqLM` (a `T5Backbone` of the same
     shape, its own random weights: keras-hub 0.32 converts no T5
     checkpoint) generating from a decoder prompt of the start token; on
     torch transformers' `generate` on the same weights. Every generator
     encodes the sources once and decodes with a cache.
   - BERT-base as a decoder (`--parts bert`, torch only): one random
     `transformers.BertLMHeadModel` (`is_decoder=True`), saved; keras_attn
     builds `application="lm"` from that directory; against transformers'
     `generate` (`use_cache=True`) on the same weights.
   - LLaMA, about 100M parameters (`--parts llama`: 12 layers, hidden 768,
     12 query heads over 3 key/value heads, SwiGLU 2048, vocabulary 32000,
     tied head): one random `transformers.LlamaForCausalLM`, saved; keras_attn
     and keras-hub (`Llama3Backbone.from_preset` on the directory) read the
     same weights; against keras-hub's `Llama3CausalLM.generate` and, on
     torch, transformers' `generate`.
   - Gemma 2, about 100M parameters (`--parts gemma`: 12 layers, hidden
     768, 12 query heads over 4 key/value heads of 64, GeGLU 2048,
     vocabulary 32000, tied head, a sliding window of 48 on every other
     layer, attention logits soft-capped at 50 and final logits at 30): one
     random `transformers.Gemma2ForCausalLM` (eager attention, the path
     that soft-caps), saved; keras_attn (variant "gemma2") and keras-hub
     (`GemmaBackbone.from_preset`) read the same weights; against keras-hub's
     `GemmaCausalLM.generate` and, on torch, transformers' `generate`.
     Prompt plus new tokens pass the window, so the windowed layers' masks
     are exercised.
   - GPT-2 small's depth at width 48 (`--parts gpt2-narrow`: 12 layers,
     hidden 48, 12 heads of 4, FFN 192, vocabulary 4096), against
     transformers' `generate` on the same weights: a step does next to no
     arithmetic, so this measures the host's time per step (Python,
     dispatch, kernel launches), which a GPU waits for.
   The contenders take turns within each repetition. On torch keras_attn is
   warmed up by a full call (its step compiles once per shape, see
   `keras_attn.torch_runtime.compiled_step.CompiledStep`) and the others by an 8-token call
   (nothing compiles); elsewhere every contender by a full call (the
   compilation). Where two generators share the weights, the
   fraction of rows whose greedy tokens are the same (over the first 16
   new tokens and over all of them) checks that they compute the same
   model.

With `--first-call-only`, each of the `--parts` among the pretrained shapes
is built and generated from once, keras_attn alone: the seconds of the
process's first `generate` (its compile included, on torch where the step
compiles). Run twice, in two processes that share torch's compile caches
(`KERAS_ATTN_TORCH_COMPILE_CACHE`, `keras_attn.torch_runtime.compile_cache`),
the second says what a later process pays; the result records the cache
folder and, on torch, the hits and misses of torch's caches, in
`generation_first_call_<backend>.json`.

Results go to `benchmarks/results/generation_<backend>.json` (parts 1 and
2), with `cached_over_uncached_tokens_per_second` and
`keras_attn_over_keras_hub_tokens_per_second` fields, and
`benchmarks/results/generation_gpt2_t5_<backend>.json` (part 3; LLaMA in
`generation_llama_<backend>.json`, Gemma 2 in `generation_gemma_<backend>.json`, the narrow GPT-2 in
`generation_host_bound_<backend>.json`), with
`keras_attn_over_keras_hub_tokens_per_second` and, on torch,
`keras_attn_over_transformers_tokens_per_second` per model; so a run of
some parts never overwrites another part's results. `report.py` prints the
tables.

    pip install -e ".[all,benchmarks]"
    KERAS_BACKEND=jax python benchmarks/generation.py
    KERAS_BACKEND=jax python benchmarks/generation.py --quick  # 1 repeat, window to 4k
    KERAS_BACKEND=torch python benchmarks/generation.py --parts gpt2 t5 --new-tokens 64
    KERAS_BACKEND=torch python benchmarks/generation.py --parts llama --new-tokens 64 --no-keras-hub
    KERAS_BACKEND=jax python benchmarks/generation.py --parts gemma --batch 4 --new-tokens 32
    KERAS_BACKEND=torch python benchmarks/generation.py --parts gpt2 --first-call-only  # twice

Not part of the test suite.
"""

import argparse
import os
import resource
import tempfile
import time

import keras
import numpy as np

import keras_attn
import placement

# torch: every decoding step shape compiles at its first call (the warm-up
# run), so the timed runs measure the compiled step; by default keras_attn
# compiles a shape only once its eager steps have taken what compiling
# costs (`keras_attn.torch_runtime.compiled_step.torch_compile_mode`).
# `KERAS_ATTN_TORCH_COMPILE=0` measures the eager step.
os.environ.setdefault("KERAS_ATTN_TORCH_COMPILE", "1")
from bert_base import BACKEND
from bert_base import CONFIG
from bert_base import compiled_call
from bert_base import timed
from bert_base import timed_side_by_side
from bert_base import write_result
from placement import device_name
from keras_attn.generation import CachedForward
from keras_attn.generation.prompts import prompt_bucket

BATCH, PROMPT, NEW_TOKENS = 8, 32, 256
TOP_P = 0.9
ESTIMATE_PREFIXES = (32, 96, 160, 224, 288)
WINDOW = 512
WINDOW_CONFIG = dict(
    vocab_size=8192, hidden_size=256, num_hidden_layers=4, num_attention_heads=4,
    intermediate_size=1024, max_position_embeddings=512, type_vocab_size=2,
)
WINDOW_LENGTHS = (1024, 2048, 4096, 8192, 16384)
# Pretrained shapes, in transformers' config fields.
GPT2_SMALL = dict(vocab_size=50257, n_positions=1024, n_embd=768, n_layer=12, n_head=12)
# GPT-2 small's depth at almost no width or vocabulary: a step does next to
# no arithmetic, so its time is the host's (Python, dispatch, launches),
# what a GPU waits for between steps (issue 30).
GPT2_NARROW = dict(vocab_size=4096, n_positions=1024, n_embd=48, n_layer=12, n_head=12)
BERT_BASE_DECODER = dict(
    vocab_size=30522, hidden_size=768, num_hidden_layers=12, num_attention_heads=12,
    intermediate_size=3072, max_position_embeddings=512, is_decoder=True,
)
T5_SMALL = dict(
    vocab_size=32128, d_model=512, d_kv=64, d_ff=2048, num_layers=6, num_heads=8,
    feed_forward_proj="relu",
)
# About 100M parameters: LLaMA's layout with grouped-query attention, 4
# query heads per key/value head, a tied head (as Llama 3.2).
LLAMA_100M = dict(
    vocab_size=32000, hidden_size=768, intermediate_size=2048, num_hidden_layers=12,
    num_attention_heads=12, num_key_value_heads=3, max_position_embeddings=2048,
    tie_word_embeddings=True,
)
# About 100M parameters with Gemma 2's traits: GeGLU, RMS norms around both
# sublayers, a sliding window on every other layer (layer 0 first), attention
# and final logits soft-capped, queries scaled by query_pre_attn_scalar**-0.5,
# 4 query heads per key/value head, a tied head. The window (48) is shorter
# than prompt plus new tokens (32 + 32), so generation crosses it.
GEMMA2_100M = dict(
    vocab_size=32000, hidden_size=768, intermediate_size=2048, num_hidden_layers=12,
    num_attention_heads=12, num_key_value_heads=4, head_dim=64, query_pre_attn_scalar=64,
    sliding_window=48, attn_logit_softcapping=50.0, final_logit_softcapping=30.0,
    max_position_embeddings=2048, tie_word_embeddings=True,
)
AGREEMENT_TOKENS = 16
TORCH_WARM_UP_TOKENS = 8


def prompts(batch, length, vocab_size):
    return np.random.default_rng(0).integers(1000, vocab_size, size=(batch, length)).astype("int32")


# Cached and uncached ------------------------------------------------------------------


def uncached_step(model, width):
    """`step(tokens, last)`: the next token of each row, the argmax of the
    full pass's logits at `last` (int32 `(batch,)`, each row's last real
    position), for tokens `(batch, width)` right-padded with the pad id."""

    def after(logits, last):
        last = keras.ops.convert_to_tensor(last, "int32")
        index = keras.ops.broadcast_to(last[:, None, None], (logits.shape[0], 1, logits.shape[2]))
        return keras.ops.argmax(keras.ops.take_along_axis(logits, index, axis=1)[:, 0], axis=-1)

    call = compiled_call(model, after)
    segments = np.zeros((BATCH, width), "int32")

    def step(tokens, last):
        return keras.ops.convert_to_numpy(call({"token_ids": tokens, "segment_ids": segments}, last))

    return step


def uncached_loop(step, prompt_ids, new_tokens, width):
    """bert4keras's decoding: `new_tokens` full passes, each over the whole
    prefix (padded to `width`), appending each row's argmax."""
    batch, length = prompt_ids.shape
    tokens = np.zeros((batch, width), "int32")
    tokens[:, :length] = prompt_ids
    for prefix in range(length, length + new_tokens):
        tokens[:, prefix] = step(tokens, np.full((batch,), prefix - 1, "int32"))
    return tokens


def uncached_step_at(step, prompt_ids, width, prefix):
    """One uncached step with a prefix of `prefix` tokens."""
    tokens = np.zeros((BATCH, width), "int32")
    tokens[:, :PROMPT] = prompt_ids
    tokens[:, PROMPT:prefix] = 1000  # stands for generated tokens; the cost does not depend on them
    last = np.full((BATCH,), prefix - 1, "int32")
    return lambda: step(tokens, last)


def integrated_seconds(step_seconds):
    """The sum over the steps (prefix lengths PROMPT .. PROMPT + NEW_TOKENS -
    1) of the per-step time interpolated linearly between the measured
    prefix lengths `step_seconds` (`{prefix: seconds}`)."""
    measured = sorted(step_seconds)
    steps = np.arange(PROMPT, PROMPT + NEW_TOKENS)
    return float(np.interp(steps, measured, [step_seconds[p] for p in measured]).sum())


def keras_hub_generators():
    """keras-hub's GPT-2 of BERT-base's size, greedy and top-p, sharing one
    backbone, and its inputs: prompts right-padded to the final length."""
    import keras_hub

    backbone = keras_hub.models.GPT2Backbone(
        vocabulary_size=CONFIG["vocab_size"], num_layers=12, num_heads=12, hidden_dim=768,
        intermediate_dim=3072, max_sequence_length=CONFIG["max_position_embeddings"],
    )
    samplers = {"greedy": "greedy", "top_p": keras_hub.samplers.TopPSampler(p=TOP_P, seed=0)}
    models = {}
    for name, sampler in samplers.items():
        models[name] = keras_hub.models.GPT2CausalLM(backbone, preprocessor=None)
        models[name].compile(sampler=sampler)
    width = PROMPT + NEW_TOKENS
    token_ids = np.zeros((BATCH, width), "int32")
    token_ids[:, :PROMPT] = prompts(BATCH, PROMPT, CONFIG["vocab_size"])
    padding_mask = np.zeros((BATCH, width), bool)
    padding_mask[:, :PROMPT] = True
    inputs = {"token_ids": token_ids, "padding_mask": padding_mask}

    def generator(model):
        return lambda: keras.ops.convert_to_numpy(
            model.generate(inputs, stop_token_ids=None)["token_ids"]
        )

    return {name: generator(model) for name, model in models.items()}


def cached_against_uncached_and_keras_hub(repeats, uncached_mode, with_keras_hub):
    model = keras_attn.build_transformer_model(CONFIG, application="lm")
    prompt_ids = prompts(BATCH, PROMPT, CONFIG["vocab_size"])
    samplers = {"greedy": "greedy", "top_p": keras_attn.samplers.TopPSampler(p=TOP_P)}
    functions = {
        ("keras_attn cached", name): (
            lambda sampler=sampler: model.generate(prompt_ids, NEW_TOKENS, sampler=sampler, seed=0)
        )
        for name, sampler in samplers.items()
    }
    keras_hub_error = None
    if with_keras_hub:
        try:
            for name, function in keras_hub_generators().items():
                functions["keras-hub GPT2CausalLM", name] = function
        except Exception as error:  # recorded, not hidden: the reason keras-hub has no row
            keras_hub_error = f"{type(error).__name__}: {error}"
            print(f"keras-hub not measured: {keras_hub_error}")
    width = PROMPT + NEW_TOKENS
    one_width = uncached_step(model, width)
    if uncached_mode == "loop":
        functions["uncached, one padded width", "greedy"] = (
            lambda: uncached_loop(one_width, prompt_ids, NEW_TOKENS, width)
        )
    timings = timed_side_by_side(functions, repeats)

    rows = []
    for (generator, sampler), (warm_up, seconds) in timings.items():
        rows.append(
            {
                "generator": generator, "sampler": sampler, "seconds": seconds,
                "warm_up_seconds": warm_up, "tokens_per_second": BATCH * NEW_TOKENS / seconds,
                "method": f"measured: {NEW_TOKENS} steps",
            }
        )
    # The uncached steps at a few prefix lengths: at the one padded width (the
    # same compiled pass each time) and at the prefix's own width.
    step_seconds = {"uncached, one padded width": {}, "uncached, growing prefix": {}}
    steps = {}
    for prefix in ESTIMATE_PREFIXES:
        if uncached_mode == "estimate":
            steps["uncached, one padded width", prefix] = uncached_step_at(one_width, prompt_ids, width, prefix)
        growing = one_width if prefix == width else uncached_step(model, prefix)
        steps["uncached, growing prefix", prefix] = uncached_step_at(growing, prompt_ids, prefix, prefix)
    for (generator, prefix), (_, seconds) in timed_side_by_side(steps, repeats).items():
        step_seconds[generator][prefix] = seconds
        print(f"{generator:<28} one step at prefix {prefix:>3}: {seconds * 1000:>8.1f} ms")
    for generator, measured in step_seconds.items():
        if not measured:
            continue
        seconds = integrated_seconds(measured)
        rows.append(
            {
                "generator": generator, "sampler": "greedy", "seconds": seconds,
                "tokens_per_second": BATCH * NEW_TOKENS / seconds,
                "method": (
                    f"estimated: one step timed at prefix lengths {sorted(measured)}, "
                    f"interpolated linearly and summed over the {NEW_TOKENS} steps"
                ),
                "step_seconds_at_prefix": {str(p): s for p, s in sorted(measured.items())},
            }
        )
    for row in rows:
        print(
            f"{row['generator']:<28} {row['sampler']:<7} {row['seconds']:>8.2f} s  "
            f"{row['tokens_per_second']:>9.1f} tokens/s  ({row['method']}"
            + (f"; warm-up {row['warm_up_seconds']:.1f} s)" if "warm_up_seconds" in row else ")")
        )

    def speed(generator, sampler="greedy"):
        found = [r for r in rows if r["generator"] == generator and r["sampler"] == sampler]
        return found[0]["tokens_per_second"] if found else None

    cached = speed("keras_attn cached")
    one_width = speed("uncached, one padded width")
    result = {
        "model": "BERT-base shape, application='lm', variant 'bert': 12 layers, hidden 768, "
                 "12 heads, FFN 3072, vocabulary 30522, float32, random weights",
        "batch": BATCH, "prompt_length": PROMPT, "new_tokens": NEW_TOKENS, "top_p": TOP_P,
        "uncached_mode": uncached_mode,
        "rows": rows,
        "cached_over_uncached_tokens_per_second": cached / one_width,
        "cached_over_uncached_growing_prefix_tokens_per_second": (
            cached / speed("uncached, growing prefix")
        ),
    }
    if keras_hub_error:
        result["keras_hub_error"] = keras_hub_error
    for sampler in samplers:
        peer = speed("keras-hub GPT2CausalLM", sampler)
        if peer:
            result[f"keras_attn_over_keras_hub_tokens_per_second_{sampler}"] = (
                speed("keras_attn cached", sampler) / peer
            )
    print(
        f"cached / uncached (one padded width): {result['cached_over_uncached_tokens_per_second']:.1f}x, "
        f"cached / uncached (growing prefix): "
        f"{result['cached_over_uncached_growing_prefix_tokens_per_second']:.1f}x"
    )
    return result


# The windowed cache --------------------------------------------------------------------


def cache_bytes(model, batch, prompt_length, new_tokens):
    """(slots per layer, bytes) of the `DecodingCache` that `generate`
    allocates for these sizes."""
    forward = CachedForward(model)
    bucket = prompt_bucket(prompt_length, forward.max_length, new_tokens)
    capacity = forward.capacity(bucket, bucket + new_tokens)
    cache = forward.empty_cache(batch, capacity)
    sizes = [
        int(np.prod(t.shape)) * np.dtype(keras.backend.standardize_dtype(t.dtype)).itemsize
        for t in keras.tree.flatten(cache)
    ]
    return capacity, sum(sizes)


def peak_rss_bytes():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux: KiB


def device_peak_bytes(reset=False):
    """The accelerator's peak allocated bytes (None on CPU); `reset` starts
    a new peak where the backend can (torch, TensorFlow; JAX's is the
    process's peak)."""
    if device_name() == "cpu":
        return None
    if BACKEND == "jax":
        import jax

        return jax.devices()[0].memory_stats()["peak_bytes_in_use"]
    if BACKEND == "torch":
        import torch

        if reset:
            torch.cuda.reset_peak_memory_stats()
        return torch.cuda.max_memory_allocated()
    import tensorflow as tf

    if reset:
        tf.config.experimental.reset_memory_stats("GPU:0")
    return tf.config.experimental.get_memory_info("GPU:0")["peak"]


def windowed(lengths, repeats):
    model = keras_attn.build_transformer_model(
        WINDOW_CONFIG, application="lm", variant="alibi", attention_window=WINDOW
    )
    prompt_ids = prompts(BATCH, PROMPT, WINDOW_CONFIG["vocab_size"])
    rss_before = peak_rss_bytes()
    rows = []
    for length in lengths:
        device_peak_bytes(reset=True)
        run = lambda length=length: model.generate(prompt_ids, length)  # noqa: E731
        # torch compiles nothing: a short call warms it up.
        warm_up = (lambda: model.generate(prompt_ids, 16)) if BACKEND == "torch" else None
        warm_up_seconds, seconds = timed(run, repeats, warm_up)
        capacity, allocated = cache_bytes(model, BATCH, PROMPT, length)
        row = {
            "new_tokens": length, "seconds": seconds, "warm_up_seconds": warm_up_seconds,
            "milliseconds_per_step": seconds / length * 1000,
            "microseconds_per_token": seconds / (length * BATCH) * 1e6,
            "cache_slots_per_layer": capacity, "cache_bytes": allocated,
            "peak_rss_growth_bytes": peak_rss_bytes() - rss_before,
        }
        peak = device_peak_bytes()
        if peak is not None:
            row["device_peak_bytes"] = peak
        rows.append(row)
        print(
            f"window {WINDOW}, {length:>6} new tokens: {seconds:>7.2f} s, "
            f"{row['milliseconds_per_step']:>6.2f} ms/step, {row['microseconds_per_token']:>7.1f} us/token, "
            f"cache {allocated / 2**20:.1f} MiB ({capacity} slots), "
            f"peak RSS +{row['peak_rss_growth_bytes'] / 2**20:.0f} MiB"
            + (f", device peak {peak / 2**20:.0f} MiB" if peak is not None else "")
        )
    shortest, longest = rows[0], rows[-1]
    return {
        "model": "variant 'alibi' (no position table), application='lm', 4 layers, hidden 256, "
                 "4 heads, FFN 1024, vocabulary 8192, float32, random weights, greedy",
        "window": WINDOW, "batch": BATCH, "prompt_length": PROMPT, "repeats": repeats,
        "rss_note": "peak RSS growth since before the first windowed generation (compilation included)",
        "rows": rows,
        "per_token_longest_over_shortest": (
            longest["microseconds_per_token"] / shortest["microseconds_per_token"]
        ),
        "cache_bytes_longest_over_shortest": longest["cache_bytes"] / shortest["cache_bytes"],
    }


# GPT-2 small and T5-small shapes, on the same weights ------------------------------------


def random_transformers_model(family, directory):
    """A random transformers GPT-2 small or T5-small in eval mode (no
    dropout), saved to `directory` with `save_pretrained`."""
    import torch
    import transformers

    torch.manual_seed(0)
    if family in ("gpt2", "gpt2-narrow"):
        shape = GPT2_SMALL if family == "gpt2" else GPT2_NARROW
        model = transformers.GPT2LMHeadModel(transformers.GPT2Config(**shape))
    elif family == "bert":
        config = transformers.BertConfig(**BERT_BASE_DECODER)
        model = transformers.BertLMHeadModel(config)
    elif family == "llama":
        model = transformers.LlamaForCausalLM(transformers.LlamaConfig(**LLAMA_100M))
    elif family == "gemma":
        # Eager attention: the one transformers path that soft-caps the attention logits.
        config = transformers.Gemma2Config(**GEMMA2_100M, attn_implementation="eager")
        model = transformers.Gemma2ForCausalLM(config)
    else:
        model = transformers.T5ForConditionalGeneration(transformers.T5Config(**T5_SMALL))
    model.eval()
    model.save_pretrained(directory)
    return model


def transformers_generator(model, prompt_ids, encoder_decoder, cache_implementation=None):
    """`generate(new_tokens)`: transformers' greedy `generate` with its
    cache (its default, dynamic one, or `cache_implementation`, e.g.
    `"static"`: preallocated, the fastest eager configuration on a GPU),
    never stopping early, on the device Keras computes on; the new tokens,
    numpy `(batch, new_tokens)`."""
    import torch
    import transformers

    device = placement.torch_device()  # the device Keras computes on
    model.to(device)
    input_ids = torch.from_numpy(prompt_ids).long().to(device)
    attention_mask = torch.ones_like(input_ids)

    def generate(new_tokens):
        settings = transformers.GenerationConfig(
            max_new_tokens=new_tokens, min_new_tokens=new_tokens, do_sample=False, num_beams=1,
            use_cache=True, pad_token_id=0, eos_token_id=None,
            decoder_start_token_id=0 if encoder_decoder else None,
            **({"cache_implementation": cache_implementation} if cache_implementation else {}),
        )
        with torch.no_grad():
            output = model.generate(input_ids, attention_mask=attention_mask, generation_config=settings)
        # A decoder-only output starts with the prompt, an encoder-decoder's with the start token.
        return output[:, 1 if encoder_decoder else prompt_ids.shape[1]:].cpu().numpy()

    return generate


def keras_hub_gpt2(directory, prompt_ids):
    """keras-hub's `GPT2CausalLM.generate`, greedy, on the GPT-2 weights
    saved in `directory`: `generate(new_tokens)`."""
    import keras_hub

    return keras_hub_causal_lm(
        keras_hub.models.GPT2Backbone, keras_hub.models.GPT2CausalLM, directory, prompt_ids
    )


def keras_hub_llama(directory, prompt_ids):
    """keras-hub's `Llama3CausalLM.generate` (keras-hub reads a `model_type:
    llama` folder as Llama 3), greedy, on the weights saved in `directory`."""
    import keras_hub

    return keras_hub_causal_lm(
        keras_hub.models.Llama3Backbone, keras_hub.models.Llama3CausalLM, directory, prompt_ids
    )


def keras_hub_gemma(directory, prompt_ids):
    """keras-hub's `GemmaCausalLM.generate` (its `GemmaBackbone` reads a
    `model_type: gemma2` folder with Gemma 2's norms, soft caps and sliding
    window), greedy, on the weights saved in `directory`."""
    import keras_hub

    return keras_hub_causal_lm(
        keras_hub.models.GemmaBackbone, keras_hub.models.GemmaCausalLM, directory, prompt_ids
    )


def keras_hub_causal_lm(backbone_class, causal_lm_class, directory, prompt_ids):
    """`generate(new_tokens)` of a keras-hub causal LM read from the
    transformers folder `directory` (`from_preset`), greedy, preprocessor
    off, prompts right-padded with a padding mask, no stop token."""
    backbone = backbone_class.from_preset(directory)
    causal_lm = causal_lm_class(backbone, preprocessor=None)
    causal_lm.compile(sampler="greedy")

    def generate(new_tokens):
        width = PROMPT + new_tokens
        token_ids = np.zeros((len(prompt_ids), width), "int32")
        token_ids[:, :PROMPT] = prompt_ids
        padding_mask = np.zeros((len(prompt_ids), width), bool)
        padding_mask[:, :PROMPT] = True
        output = causal_lm.generate(
            {"token_ids": token_ids, "padding_mask": padding_mask}, stop_token_ids=None
        )
        return keras.ops.convert_to_numpy(output["token_ids"])[:, PROMPT:]

    return generate


def keras_hub_t5(directory, source_ids):
    """keras-hub's `T5Seq2SeqLM.generate`, greedy, on a `T5Backbone` of
    T5-small's shape with its own random weights (keras-hub 0.32 reads no
    T5 checkpoint, so `directory` is not used): `generate(new_tokens)`."""
    import keras_hub

    backbone = keras_hub.models.T5Backbone(
        vocabulary_size=T5_SMALL["vocab_size"], num_layers=T5_SMALL["num_layers"],
        num_heads=T5_SMALL["num_heads"], hidden_dim=T5_SMALL["d_model"],
        intermediate_dim=T5_SMALL["d_ff"], key_value_dim=T5_SMALL["d_kv"], dropout=0.0,
        activation="relu", use_gated_activation=False, tie_embedding_weights=True,
    )
    seq2seq_lm = keras_hub.models.T5Seq2SeqLM(backbone, preprocessor=None)
    seq2seq_lm.compile(sampler="greedy")

    def generate(new_tokens):
        # The decoder's prompt: the start token (the pad id 0), then room for the new tokens.
        decoder_padding_mask = np.zeros((len(source_ids), 1 + new_tokens), bool)
        decoder_padding_mask[:, 0] = True
        output = seq2seq_lm.generate(
            {
                "encoder_token_ids": source_ids,
                "encoder_padding_mask": np.ones_like(source_ids, bool),
                "decoder_token_ids": np.zeros((len(source_ids), 1 + new_tokens), "int32"),
                "decoder_padding_mask": decoder_padding_mask,
            },
            stop_token_ids=None,
        )
        return keras.ops.convert_to_numpy(output["decoder_token_ids"])[:, 1:]

    return generate


PRETRAINED_SHAPES = {
    "gpt2": {
        "description": (
            "GPT-2 small shape (variant 'gpt2'): 12 layers, hidden 768, 12 heads, FFN 3072, "
            "vocabulary 50257, float32, random weights: one transformers GPT2LMHeadModel, saved "
            "and loaded by keras_attn and by keras-hub (GPT2Backbone.from_preset)"
        ),
        "vocab_size": GPT2_SMALL["vocab_size"],
        "keras_hub": ("keras-hub GPT2CausalLM", keras_hub_gpt2, True),
        "transformers": "transformers GPT2LMHeadModel",
    },
    "gpt2-narrow": {
        "description": (
            "GPT-2 small's depth at width 48 (variant 'gpt2'): 12 layers, hidden 48, 12 heads of "
            "4, FFN 192, vocabulary 4096, float32, random weights: one transformers "
            "GPT2LMHeadModel, saved and loaded by keras_attn; a step does next to no arithmetic, "
            "so its time is the host's"
        ),
        "vocab_size": GPT2_NARROW["vocab_size"],
        "keras_hub": None,
        "transformers": "transformers GPT2LMHeadModel",
    },
    "bert": {
        "description": (
            "BERT-base shape as a decoder (variant 'bert', application 'lm'): 12 layers, hidden "
            "768, 12 heads, FFN 3072, vocabulary 30522, float32, random weights: one transformers "
            "BertLMHeadModel (is_decoder=True), saved and loaded by keras_attn (torch only: "
            "keras-hub has no BERT decoder)"
        ),
        "vocab_size": BERT_BASE_DECODER["vocab_size"],
        "keras_hub": None,
        "transformers": "transformers BertLMHeadModel",
        "application": "lm",
    },
    "t5": {
        "description": (
            "T5-small shape (variant 't5', v1.0): 6 + 6 layers, d_model 512, 8 heads, d_kv 64, "
            "d_ff 2048 (ReLU), vocabulary 32128, float32, random weights: one transformers "
            "T5ForConditionalGeneration, saved and loaded by keras_attn; keras-hub's T5Backbone "
            "has its own random weights (keras-hub 0.32 converts no T5 checkpoint)"
        ),
        "vocab_size": T5_SMALL["vocab_size"],
        "keras_hub": ("keras-hub T5Seq2SeqLM", keras_hub_t5, False),
        "transformers": "transformers T5ForConditionalGeneration",
    },
    "llama": {
        "description": (
            "LLaMA shape, about 100M parameters (variant 'llama'): 12 layers, hidden 768, 12 "
            "query heads and 3 key/value heads of 64, SwiGLU 2048, vocabulary 32000, tied head, "
            "float32, random weights: one transformers LlamaForCausalLM, saved and loaded by "
            "keras_attn and by keras-hub (Llama3Backbone.from_preset)"
        ),
        "vocab_size": LLAMA_100M["vocab_size"],
        "keras_hub": ("keras-hub Llama3CausalLM", keras_hub_llama, True),
        "transformers": "transformers LlamaForCausalLM",
    },
    "gemma": {
        "description": (
            "Gemma 2 shape, about 100M parameters (variant 'gemma2'): 12 layers, hidden 768, 12 "
            "query heads and 4 key/value heads of 64, GeGLU 2048, vocabulary 32000, tied head, "
            "sliding window 48 on every other layer, attention logits soft-capped at 50 and final "
            "logits at 30, query_pre_attn_scalar 64, float32, random weights: one transformers "
            "Gemma2ForCausalLM (eager attention), saved and loaded by keras_attn and by keras-hub "
            "(GemmaBackbone.from_preset)"
        ),
        "vocab_size": GEMMA2_100M["vocab_size"],
        "keras_hub": ("keras-hub GemmaCausalLM", keras_hub_gemma, True),
        "transformers": "transformers Gemma2ForCausalLM",
    },
}


def pretrained_shape(family, new_tokens, repeats, with_keras_hub, batch=BATCH):
    """keras_attn's greedy `generate` against keras-hub's and (on torch)
    transformers' for one of `PRETRAINED_SHAPES`, side by side, `batch`
    prompts of `PROMPT` tokens."""
    shape = PRETRAINED_SHAPES[family]
    load_before = os.getloadavg()[0]
    prompt_ids = prompts(batch, PROMPT, shape["vocab_size"])
    generators, same_weights, keras_hub_error = {}, set(), None
    with tempfile.TemporaryDirectory() as directory:
        transformers_model = random_transformers_model(family, directory)
        application = {"application": shape["application"]} if "application" in shape else {}
        model = keras_attn.build_transformer_model(directory, **application)
        generators["keras_attn"] = lambda tokens: model.generate(prompt_ids, tokens)
        if with_keras_hub and shape["keras_hub"] is not None:
            name, make, shares_weights = shape["keras_hub"]
            try:
                generators[name] = make(directory, prompt_ids)
                if shares_weights:
                    same_weights.add(name)
            except Exception as error:  # recorded, not hidden: the reason keras-hub has no row
                keras_hub_error = f"{type(error).__name__}: {error}"
                print(f"keras-hub not measured: {keras_hub_error}")
    devices = {name: device_name() for name in generators}
    if BACKEND == "torch":
        # transformers' default cache and, on a GPU, its static cache.
        caches = {shape["transformers"]: None}
        if placement.device_kind(device_name()) == "gpu":
            caches[f"{shape['transformers']} (static cache)"] = "static"
        for name, cache_implementation in caches.items():
            generators[name] = transformers_generator(
                transformers_model, prompt_ids, family == "t5", cache_implementation
            )
            same_weights.add(name)
            devices[name] = placement.torch_device_name(placement.torch_device())
    placement.check_placements(devices)
    outputs = {}

    def recorded(name, generate, tokens):
        def call():
            outputs[name] = generate(tokens)

        return call

    functions = {name: recorded(name, generate, new_tokens) for name, generate in generators.items()}
    warm_ups = None
    if BACKEND == "torch":
        # transformers and keras-hub compile nothing on torch: a short call
        # warms them up. keras_attn compiles its step per shape
        # (`CompiledStep`): its warm-up is a full call, whose time is the
        # compilation's plus one run's.
        warm_ups = {
            name: recorded(name, generate, TORCH_WARM_UP_TOKENS)
            for name, generate in generators.items() if name != "keras_attn"
        }
    timings = timed_side_by_side(functions, repeats, warm_ups)
    rows = []
    for name, (warm_up, seconds) in timings.items():
        if outputs[name].shape != (batch, new_tokens):
            raise RuntimeError(
                f"{name} returned new tokens of shape {outputs[name].shape}, not {(batch, new_tokens)}."
            )
        rows.append(
            {
                "generator": name, "seconds": seconds, "warm_up_seconds": warm_up,
                "tokens_per_second": batch * new_tokens / seconds,
            }
        )
        print(
            f"{family:<5} {name:<41} {seconds:>8.2f} s  {batch * new_tokens / seconds:>8.1f} tokens/s  "
            f"(warm-up {warm_up:.1f} s)"
        )
    result = {
        "model": shape["description"], "batch": batch, "prompt_length": PROMPT,
        "new_tokens": new_tokens, "sampler": "greedy", "devices": devices, "rows": rows,
        "greedy_rows_equal_to_keras_attn": {},
        # Other work on the machine slows every contender; the ratios are side by side.
        "load_average_1_minute": {"before": load_before, "after": os.getloadavg()[0]},
    }
    if keras_hub_error:
        result["keras_hub_error"] = keras_hub_error
    speed = {row["generator"]: row["tokens_per_second"] for row in rows}
    for name in generators:
        if name == "keras_attn":
            continue
        peer = "keras_hub" if name.startswith("keras-hub") else "transformers"
        if name.endswith("(static cache)"):
            peer = "transformers_static_cache"
        result[f"keras_attn_over_{peer}_tokens_per_second"] = speed["keras_attn"] / speed[name]
        if name in same_weights:
            equal = outputs[name] == outputs["keras_attn"]
            result["greedy_rows_equal_to_keras_attn"][name] = {
                f"first_{AGREEMENT_TOKENS}": float(equal[:, :AGREEMENT_TOKENS].all(axis=1).mean()),
                "all": float(equal.all(axis=1).mean()),
            }
    for key, value in result.items():
        if key.startswith("keras_attn_over"):
            print(f"{family:<5} {key}: {value:.2f}x")
    print(f"{family:<5} greedy rows equal to keras_attn's: {result['greedy_rows_equal_to_keras_attn']}")
    return result


def first_call(family, new_tokens):
    """The seconds of keras_attn's first greedy `generate` in this process
    for one of `PRETRAINED_SHAPES` (compiling included), with where torch's
    compile caches are and what they held."""
    shape = PRETRAINED_SHAPES[family]
    prompt_ids = prompts(BATCH, PROMPT, shape["vocab_size"])
    with tempfile.TemporaryDirectory() as directory:
        random_transformers_model(family, directory)
        application = {"application": shape["application"]} if "application" in shape else {}
        model = keras_attn.build_transformer_model(directory, **application)
    started = time.perf_counter()
    tokens = model.generate(prompt_ids, new_tokens)
    seconds = time.perf_counter() - started
    if np.shape(tokens) != (BATCH, new_tokens):
        raise RuntimeError(f"keras_attn returned new tokens of shape {np.shape(tokens)}.")
    result = {
        "model": shape["description"], "batch": BATCH, "prompt_length": PROMPT,
        "new_tokens": new_tokens, "device": device_name(), "first_call_seconds": seconds,
    }
    if BACKEND == "torch":
        from torch._dynamo.utils import counters

        from keras_attn.torch_runtime import compile_cache

        from keras_attn.torch_runtime import settings

        result["compile_cache"] = compile_cache.ensure()._asdict()
        # How the step reaches torch.compile: its Python, or its recording.
        result["recorded_steps"] = settings.current().recorded_steps
        result["torch_cache_counters"] = {
            key: count for group in ("inductor", "aot_autograd")
            for key, count in counters[group].items() if "cache" in key
        }
    print(f"{family:<5} keras_attn first call {seconds:.1f} s  {result.get('compile_cache', '')}")
    return result


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--quick", action="store_true",
                        help="one repeat, windowed lengths 1k to 4k")
    parser.add_argument("--window-lengths", type=int, nargs="+", default=None)
    parser.add_argument("--uncached", choices=["loop", "estimate"], default=None,
                        help="run the uncached loop for real (default on a GPU) or estimate it "
                             "from steps at a few prefix lengths (default on CPU)")
    parser.add_argument("--parts", nargs="+",
                        choices=["windowed", "cached", "gpt2", "t5", "bert", "llama",
                                 "gemma", "gpt2-narrow"],
                        default=["windowed", "cached", "gpt2", "t5"])
    parser.add_argument("--new-tokens", type=int, default=NEW_TOKENS,
                        help="new tokens per row for the gpt2 and t5 parts")
    parser.add_argument("--batch", type=int, default=BATCH,
                        help="prompts per call for the pretrained shapes (gpt2 to gemma)")
    parser.add_argument("--no-keras-hub", action="store_true")
    parser.add_argument("--first-call-only", action="store_true",
                        help="keras_attn's first generate only, for each pretrained shape of "
                             "--parts (run twice to measure a second process's first call)")
    parser.add_argument("--output", default=None)
    arguments = parser.parse_args()
    repeats = 1 if arguments.quick else arguments.repeats
    lengths = arguments.window_lengths or (WINDOW_LENGTHS[:3] if arguments.quick else WINDOW_LENGTHS)
    device = device_name()
    uncached_mode = arguments.uncached or ("estimate" if device == "cpu" else "loop")
    print(f"backend={BACKEND}, device={device}")
    if arguments.first_call_only:
        result = {
            family: first_call(family, arguments.new_tokens)
            for family in arguments.parts if family in PRETRAINED_SHAPES
        }
        write_result({"device": device, **result}, arguments.output,
                     f"generation_first_call_{BACKEND}.json")
        return

    result = {"device": device, "repeats": repeats}
    if "windowed" in arguments.parts:
        result["windowed"] = windowed(lengths, repeats)
    if "cached" in arguments.parts:
        result |= cached_against_uncached_and_keras_hub(
            repeats, uncached_mode, not arguments.no_keras_hub
        )
    if {"windowed", "cached"} & set(arguments.parts):
        write_result(result, arguments.output, f"generation_{BACKEND}.json")
    # GPT-2, T5 and BERT in one file, LLaMA, Gemma 2 and the narrow GPT-2 in their own.
    for shapes, name in (
        (("gpt2", "t5", "bert"), f"generation_gpt2_t5_{BACKEND}.json"),
        (("llama",), f"generation_llama_{BACKEND}.json"),
        (("gemma",), f"generation_gemma_{BACKEND}.json"),
        (("gpt2-narrow",), f"generation_host_bound_{BACKEND}.json"),
    ):
        shapes = [family for family in shapes if family in arguments.parts]
        if not shapes:
            continue
        result = {"device": device, "repeats": repeats}
        for family in shapes:
            result[family] = pretrained_shape(
                family, arguments.new_tokens, repeats, not arguments.no_keras_hub,
                arguments.batch,
            )
        write_result(result, arguments.output, name)


if __name__ == "__main__":
    main()
