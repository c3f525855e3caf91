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

Results go to `benchmarks/results/generation_<backend>.json`, with
`cached_over_uncached_tokens_per_second` and
`keras_attn_over_keras_hub_tokens_per_second` fields; `report.py` prints the
tables.

    pip install -e ".[all,benchmarks]"
    KERAS_BACKEND=jax python benchmarks/generation.py
    KERAS_BACKEND=jax python benchmarks/generation.py --quick  # 1 repeat, window to 4k

Not part of the test suite.
"""

import argparse
import resource

import keras
import numpy as np

import keras_attn
from banded_attention import device_name
from bert_base import BACKEND
from bert_base import CONFIG
from bert_base import compiled_call
from bert_base import timed
from bert_base import timed_side_by_side
from bert_base import write_result
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


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--quick", action="store_true",
                        help="one repeat, windowed lengths 1k to 4k")
    parser.add_argument("--window-lengths", type=int, nargs="+", default=None)
    parser.add_argument("--uncached", choices=["loop", "estimate"], default=None,
                        help="run the uncached loop for real (default on a GPU) or estimate it "
                             "from steps at a few prefix lengths (default on CPU)")
    parser.add_argument("--parts", nargs="+", choices=["windowed", "cached"],
                        default=["windowed", "cached"])
    parser.add_argument("--no-keras-hub", action="store_true")
    parser.add_argument("--output", default=None)
    arguments = parser.parse_args()
    repeats = 1 if arguments.quick else arguments.repeats
    lengths = arguments.window_lengths or (WINDOW_LENGTHS[:3] if arguments.quick else WINDOW_LENGTHS)
    device = device_name()
    uncached_mode = arguments.uncached or ("estimate" if device == "cpu" else "loop")
    print(f"backend={BACKEND}, device={device}")

    result = {"device": device, "repeats": repeats}
    if "windowed" in arguments.parts:
        result["windowed"] = windowed(lengths, repeats)
    if "cached" in arguments.parts:
        result |= cached_against_uncached_and_keras_hub(
            repeats, uncached_mode, not arguments.no_keras_hub
        )
    write_result(result, arguments.output, f"generation_{BACKEND}.json")


if __name__ == "__main__":
    main()
