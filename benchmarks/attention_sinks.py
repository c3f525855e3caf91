"""Perplexity past the window: a plain sliding-window cache against one that
keeps StreamingLLM's sink tokens, and full attention as the reference.

A small LLaMA-layout character LM (RoPE, RMS norms, 2 blocks of width 64)
is trained on rows of `--train-length` characters of the standard library's
source (`examples/common.source_characters`, as the examples do), once as
is and once with learned sink logits (`attention_sinks=True`, gpt-oss's).
The trained weights are then rebuilt with inference options and scored on
held-out source cut into rows of `--eval-length` characters, longer than
the window:

- full attention (every key; the cache grows with the length, and RoPE
  meets distances it never trained on);
- `attention_window=W` (a ring of `W` slots: the first tokens leave it);
- `attention_window=W` with `attention_sink_tokens=k` (`k + W` slots: the
  first `k` positions stay).

Scores are next-character perplexities (`exp` of the mean loss) over the
positions `>= W` of each row (where the window has dropped keys) and over
every position. They come from the full pass under each option's mask,
which `tests/generation/test_attention_sinks.py` checks equals cached
decoding step by step; the cache's capacity is `CachedForward.capacity`.

The defaults score within the training length (train and evaluate at 128,
window 32): every distance was seen in training, so full attention is the
reference and the windows differ only in which keys they drop. Past the
training length (`--train-length 64 --window 64 --eval-length 512 --tag
past_training_length`) the sink keys, kept at their original positions,
sit at distances RoPE never saw.

    KERAS_BACKEND=jax python benchmarks/attention_sinks.py

Writes `benchmarks/results/attention_sinks_<backend>[_<tag>].json`. Not part
of the test suite; a few minutes on two CPU cores with JAX.
"""

import argparse
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, os.pardir, "examples"))

import keras  # noqa: E402
import numpy as np  # noqa: E402

import keras_attn  # noqa: E402
from common import source_characters, windows  # noqa: E402  (no Keras at import)
from keras_attn.generation.cached_forward import CachedForward  # noqa: E402


def parse_arguments(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--train-length", type=int, default=128)
    parser.add_argument("--window", type=int, default=32, help="the window W")
    parser.add_argument("--sink-tokens", type=int, nargs="+", default=[1, 4])
    parser.add_argument("--eval-length", type=int, default=128)
    parser.add_argument("--eval-characters", type=int, default=16384)
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--output", default=os.path.join(HERE, "results"))
    parser.add_argument("--tag", default="", help="appended to the result file's name")
    return parser.parse_args(argv)


def config(vocabulary_size, max_length, learned_sinks):
    return dict(
        vocab_size=vocabulary_size, hidden_size=64, num_hidden_layers=2,
        num_attention_heads=4, intermediate_size=128, max_position_embeddings=max_length,
        pad_token_id=0, attention_sinks=learned_sinks,
    )


def train(rows, vocabulary_size, max_length, epochs, learned_sinks):
    keras.utils.set_random_seed(0)
    model = keras_attn.build_transformer_model(
        config(vocabulary_size, max_length, learned_sinks), variant="llama", application="lm"
    )
    model.compile(
        optimizer=keras.optimizers.Adam(2e-3),
        loss=keras_attn.TokenCrossEntropy(ignore_id=0),
        jit_compile=keras.config.backend() != "torch",
    )
    model.fit({"token_ids": rows[:, :-1]}, rows[:, 1:], batch_size=32, epochs=epochs, verbose=0)
    return model


def perplexities(model, ids, length, characters, window):
    """Perplexity over positions `>= window` and over all positions, of rows
    of `length + 1` characters of `ids` (the first `characters`)."""
    count = characters // (length + 1)
    rows = ids[: count * (length + 1)].reshape(count, length + 1)
    logits = model.predict({"token_ids": rows[:, :-1]}, batch_size=4, verbose=0)
    logits = logits.astype("float64")
    logits -= logits.max(-1, keepdims=True)
    log_probabilities = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    losses = -np.take_along_axis(log_probabilities, rows[:, 1:, None], axis=-1)[..., 0]
    return float(np.exp(losses[:, window:].mean())), float(np.exp(losses.mean()))


def main(arguments):
    ids, vocabulary = source_characters()
    split = int(0.85 * len(ids))
    train_ids, test_ids = ids[:split], ids[split:]
    rows = windows(train_ids, arguments.train_length + 1)
    window, length = arguments.window, arguments.eval_length
    options = {"full attention": {}, f"window {window}": {"attention_window": window}}
    for k in arguments.sink_tokens:
        options[f"window {window} + {k} sink tokens"] = {
            "attention_window": window, "attention_sink_tokens": k,
        }
    print(
        f"backend={keras.config.backend()}: {len(rows)} training rows of "
        f"{arguments.train_length}, evaluated on rows of {length} "
        f"({arguments.eval_characters} held-out characters)"
    )
    results = {}
    for trained, learned_sinks in (("plain", False), ("learned sink logits", True)):
        start = time.perf_counter()
        model = train(rows, len(vocabulary), length, arguments.epochs, learned_sinks)
        seconds = time.perf_counter() - start
        weights = model.get_weights()
        for label, overrides in options.items():
            # The trained weights, rebuilt with this option's mask.
            model = keras_attn.build_transformer_model(
                config(len(vocabulary), length, learned_sinks), variant="llama",
                application="lm", **overrides,
            )
            model.set_weights(weights)
            past, every = perplexities(
                model, test_ids, length, arguments.eval_characters, window
            )
            capacity = CachedForward(model).capacity(1, length)
            results[f"{trained} / {label}"] = {
                "trained": trained, "inference": overrides, "training_seconds": seconds,
                "perplexity_past_window": past, "perplexity_all_positions": every,
                "cache_slots": capacity,
            }
            print(
                f"{trained:<20} {label:<28} past the window {past:7.3f}  "
                f"all {every:7.3f}  cache {capacity} slots"
            )
    results["_meta"] = {
        "backend": keras.config.backend(), "train_length": arguments.train_length,
        "window": window, "eval_length": length, "eval_characters": arguments.eval_characters,
        "epochs": arguments.epochs, "model": "llama variant, hidden 64, 2 blocks, 4 heads",
        "text": "standard library source (argparse, textwrap, string, json), last 15% held out",
    }
    os.makedirs(arguments.output, exist_ok=True)
    tag = f"_{arguments.tag}" if arguments.tag else ""
    path = os.path.join(arguments.output, f"attention_sinks_{keras.config.backend()}{tag}.json")
    with open(path, "w") as file:
        json.dump(results, file, indent=2)
    print(f"wrote {path}")


if __name__ == "__main__":
    main(parse_arguments())
