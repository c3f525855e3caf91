"""The cost of ReRoPE and Leaky ReRoPE against plain RoPE, over sequence length.

In one process, on the backend KERAS_BACKEND selects, float32, batch 1:

1. Full pass: one `keras_attn.MultiHeadAttention` layer (hidden 768, 12
   heads of 64, causal, rotary positions), jit-compiled on TensorFlow and
   JAX (`bert_base.device_forward`), with `rotary_scaling` None (RoPE),
   `rerope` (window 256) and `leaky_rerope` (window 256, k 16), at each
   `--lengths`. ReRoPE computes three score matrices where RoPE computes one
   (see `keras_attn.layers.rerope`) and never takes the fused kernel.
2. Per decoding step: a one-layer RoFormer language model of the same
   attention (FFN 3072, vocabulary 1000) generating greedily after a prompt
   of each length: `(time of 1 + N new tokens - time of 1 new token) / N`,
   so the prompt's encoding cancels. A ReRoPE step rotates every cached key
   three ways (the cache holds them unrotated).

The contenders take turns within each repetition (`timed_side_by_side`);
rows give the median time and the ratio to RoPE at the same length.
Results go to `benchmarks/results/rerope_<backend>.json`.

    KERAS_BACKEND=jax python benchmarks/rerope.py

Not part of the test suite.
"""

import argparse

import keras
import numpy as np

import keras_attn
from keras_attn.layers.positions import make_position
from bert_base import device_forward, timed_side_by_side, write_result
from placement import device_name

BACKEND = keras.config.backend()
HIDDEN, HEADS, HEAD_SIZE = 768, 12, 64
SCALINGS = {
    "rope": None,
    "rerope": {"rope_type": "rerope", "window": 256},
    "leaky_rerope": {"rope_type": "leaky_rerope", "window": 256, "k": 16},
}


def full_pass(scaling, length):
    keras.utils.set_random_seed(0)
    layer = keras_attn.MultiHeadAttention(
        HEADS, HEAD_SIZE, position=make_position("rotary", scaling=scaling)
    )
    query = keras.Input((length, HIDDEN), name="query")
    model = keras.Model({"query": query}, layer(query, use_causal_mask=True))
    data = {"query": np.random.default_rng(0).normal(size=(1, length, HIDDEN)).astype("float32")}
    return device_forward(model, data)


def decoding(scaling, length, new_tokens):
    """`(one, many)`: generate 1 and 1 + `new_tokens` tokens after a prompt
    of `length`."""
    keras.utils.set_random_seed(0)
    config = dict(
        vocab_size=1000, hidden_size=HIDDEN, num_hidden_layers=1, num_attention_heads=HEADS,
        intermediate_size=3072, max_position_embeddings=length + new_tokens + 1,
        hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
    )
    model = keras_attn.build_transformer_model(
        config, variant="roformer", application="lm", rope_scaling=scaling
    )
    prompt = np.random.default_rng(1).integers(5, 1000, size=(1, length)).tolist()
    return (
        lambda: model.generate(prompt, 1),
        lambda: model.generate(prompt, 1 + new_tokens),
    )


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lengths", type=int, nargs="+", default=[1024, 4096])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--new-tokens", type=int, default=32)
    parser.add_argument("--output", default=None)
    arguments = parser.parse_args()

    rows = []
    for length in arguments.lengths:
        passes = {name: full_pass(scaling, length) for name, scaling in SCALINGS.items()}
        for name, (_, seconds) in timed_side_by_side(passes, arguments.repeats).items():
            rows.append({"part": "full pass", "method": name, "length": length, "seconds": seconds})
        functions = {}
        for name, scaling in SCALINGS.items():
            one, many = decoding(scaling, length, arguments.new_tokens)
            functions[(name, "one")], functions[(name, "many")] = one, many
        timings = timed_side_by_side(functions, arguments.repeats)
        for name in SCALINGS:
            step = (timings[(name, "many")][1] - timings[(name, "one")][1]) / arguments.new_tokens
            rows.append({"part": "decoding step", "method": name, "length": length, "seconds": step})
    for row in rows:
        rope = next(
            r for r in rows
            if r["part"] == row["part"] and r["length"] == row["length"] and r["method"] == "rope"
        )
        row["vs_rope"] = row["seconds"] / rope["seconds"]
        print(
            f"{row['part']:<14} {row['method']:<13} {row['length']:>6}: "
            f"{row['seconds'] * 1000:>9.2f} ms  {row['vs_rope']:.2f}x RoPE"
        )
    write_result(
        {
            "layer": f"hidden {HIDDEN}, {HEADS} heads of {HEAD_SIZE}, float32, batch 1, causal",
            "device": device_name(),
            "scalings": SCALINGS,
            "new_tokens": arguments.new_tokens,
            "repeats": arguments.repeats,
            "rows": rows,
        },
        arguments.output,
        f"rerope_{BACKEND}.json",
    )


if __name__ == "__main__":
    main()
