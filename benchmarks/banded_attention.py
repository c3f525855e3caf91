"""Banded local attention against the dense masked path, over sequence length.

One `keras_attn.MultiHeadAttention` layer (hidden 768, 12 heads of 64,
float32, batch 1) with `attention_window=512`, in one process on the backend
KERAS_BACKEND selects, jit-compiled on TensorFlow and JAX:

- banded: the layer as users build it, which computes only the blocks the
  window reaches (linear in the sequence length);
- dense: the same weights without a window, given the same band as an
  explicit `LocalMaskBaseline` mask, so it builds the full score matrix;
  measured only while its estimated memory (four float32 score tensors)
  fits in `--dense-memory-gib`.

For each length it reports the median forward time over `--repeats` runs
after a warm-up (banded and dense taking turns), the time per token, and the time per token relative to the
banded path at the shortest length (the issue's target: at most 1.25 at
16,384 tokens against 2,048). Results go to
`benchmarks/results/banded_attention_<backend>.json`.

    KERAS_BACKEND=jax python benchmarks/banded_attention.py

Not part of the test suite.
"""

import argparse
import os

import keras
import numpy as np

import keras_attn
from bert_base import device_forward, timed_side_by_side, write_result
from placement import device_name

BACKEND = keras.config.backend()
HIDDEN, HEADS, HEAD_SIZE = 768, 12, 64


BIASES = {
    "none": None,
    "alibi": lambda causal: keras_attn.layers.ALiBiBias(HEADS, causal=causal),
    "kerple": lambda causal: keras_attn.layers.KerpleBias(HEADS, form="log"),
}


def forward(layer, length, causal, explicit_mask, bias=None):
    """A forward pass of `layer` on one random sequence already on the
    device (see `bert_base.device_forward`), with the relative-position
    bias layer `bias`: by distance on the banded path, as a full matrix on
    the dense one."""
    inputs = {"query": keras.Input((length, HIDDEN), name="query")}
    mask = attention_bias = distance_bias = None
    if explicit_mask is not None:
        mask = keras_attn.LocalMaskBaseline(**explicit_mask)(inputs["query"])
        if bias is not None:
            attention_bias = bias(inputs["query"])
    elif bias is not None:
        distance_bias = bias(inputs["query"], by_distance=True)
    outputs = layer(
        inputs["query"], attention_mask=mask, attention_bias=attention_bias,
        distance_bias=distance_bias, use_causal_mask=causal,
    )
    model = keras.Model(inputs, outputs)
    data = {"query": np.random.default_rng(0).normal(size=(1, length, HIDDEN)).astype("float32")}
    return device_forward(model, data)


def dense_gib(length):
    return 4 * HEADS * length * length * 4 / 2**30


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--window", type=int, default=512)
    parser.add_argument("--lengths", type=int, nargs="+", default=[2048, 4096, 8192, 16384])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--dense-memory-gib", type=float, default=8.0)
    parser.add_argument("--dtype", default="float32", help="layer dtype policy, e.g. bfloat16")
    parser.add_argument("--bias", choices=sorted(BIASES), default="none",
                        help="a relative-position bias added to the scores")
    parser.add_argument("--paths", nargs="+", default=["banded", "dense"])
    parser.add_argument("--causal", choices=["both", "causal", "bidirectional"], default="both")
    parser.add_argument("--output", default=None)
    arguments = parser.parse_args()
    keras.config.set_dtype_policy(arguments.dtype)

    rows = []
    directions = {"both": (True, False), "causal": (True,), "bidirectional": (False,)}
    for causal in directions[arguments.causal]:
        for length in arguments.lengths:
            # Banded and dense take turns at each length (one window, same seed).
            functions = {}
            for path in arguments.paths:
                if path == "dense" and dense_gib(length) > arguments.dense_memory_gib:
                    print(f"dense  causal={causal} {length:>6}: skipped (~{dense_gib(length):.0f} GiB)")
                    continue
                keras.utils.set_random_seed(0)
                window = arguments.window if path == "banded" else None
                layer = keras_attn.MultiHeadAttention(HEADS, HEAD_SIZE, attention_window=window)
                explicit_mask = None if window else {"window": arguments.window, "causal": causal}
                bias = BIASES[arguments.bias]
                functions[path] = forward(
                    layer, length, causal, explicit_mask, bias and bias(causal)
                )
            for path, (warm_up, seconds) in timed_side_by_side(functions, arguments.repeats).items():
                rows.append(
                    {
                        "path": path, "causal": causal, "length": length, "seconds": seconds,
                        "warm_up_seconds": warm_up, "microseconds_per_token": seconds / length * 1e6,
                    }
                )
                print(
                    f"{path:<6} causal={causal!s:<5} {length:>6}: {seconds * 1000:>8.1f} ms, "
                    f"{seconds / length * 1e6:>7.1f} us/token (warm-up {warm_up:.1f} s)"
                )
    shortest = min(arguments.lengths)
    for row in rows:
        base = next(
            r for r in rows
            if r["path"] == "banded" and r["causal"] == row["causal"] and r["length"] == shortest
        )
        row["per_token_vs_banded_shortest"] = (
            row["microseconds_per_token"] / base["microseconds_per_token"]
        )
    result = {
        "layer": f"hidden {HIDDEN}, {HEADS} heads of {HEAD_SIZE}, {arguments.dtype}, batch 1",
        "device": device_name(),
        # glibc's allocator settings change the torch rows (see the README).
        "environment": {k: v for k, v in os.environ.items() if k.startswith("MALLOC_")},
        "window": arguments.window,
        "bias": arguments.bias,
        "repeats": arguments.repeats,
        "rows": rows,
    }
    suffix = "" if arguments.bias == "none" else f"_{arguments.bias}"
    suffix += "" if arguments.dtype == "float32" else f"_{arguments.dtype}"
    write_result(result, arguments.output, f"banded_attention_{BACKEND}{suffix}.json")


if __name__ == "__main__":
    main()
