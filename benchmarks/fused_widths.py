"""Fused attention for decoupled widths: RoBERTa+ against BERT-base, one backend.

In one process, on the backend KERAS_BACKEND selects, this measures inference
at batch 8 x 128 (float32 or `--dtype`, random weights, jit-compiled on
TensorFlow and JAX, inputs already on the device: `bert_base.device_forward`)
of:

- BERT-base: hidden 768, 12 heads of 64, 12 layers, FFN 3072;
- RoBERTa+-shaped base: the same with `attention_key_size=256` (query/key
  heads four times as wide as the value heads), on the fused path
  (`fused_attention=True`: `keras.ops.dot_product_attention` with the value
  heads zero-padded to the key width on JAX and TensorFlow,
  `scaled_dot_product_attention` with value heads of their own width on
  torch);
- the same RoBERTa+ model and weights with `fused_attention=False` (einsum
  path). The faster of the two is the default where
  `keras_attn.layers.dot_product_attention.fuses_decoupled_widths()` says
  so; the result records which path the default takes.

Each number is the median of `--repeats` timed runs after a warm-up, the
three models taking turns within each repetition (see
`bert_base.timed_side_by_side`). Results go to
`benchmarks/results/fused_widths_<backend>.json`.

    KERAS_BACKEND=jax python benchmarks/fused_widths.py
    KERAS_BACKEND=jax python benchmarks/fused_widths.py --quick --repeats 1  # smoke test

Not part of the test suite.
"""

import argparse

import keras
import numpy as np

import keras_attn
from bert_base import BACKEND
from bert_base import CONFIG
from bert_base import device_forward
from bert_base import timed_side_by_side
from bert_base import write_result
from keras_attn.layers.dot_product_attention import fuses_decoupled_widths

BATCH, LENGTH = 8, 128
KEY_SIZE = 256


def with_attention_path(model, fused):
    """A copy of `model`, same weights, whose attention layers take the
    fused path (`fused=True`) or the einsum path (`fused=False`)."""
    config = model.get_config()
    for layer in config["layers"]:
        if "fused_attention" in layer["config"]:
            layer["config"]["fused_attention"] = fused
    copy = type(model).from_config(config)
    copy.set_weights(model.get_weights())
    return copy


def inference(model):
    tokens = np.random.default_rng(0).integers(1000, 30000, size=(BATCH, LENGTH)).astype("int32")
    data = {"token_ids": tokens, "segment_ids": np.zeros_like(tokens)}
    return device_forward(model, data)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="2 layers instead of 12 (smoke test)")
    parser.add_argument("--dtype", default="float32", help="dtype policy, e.g. bfloat16")
    parser.add_argument("--output", default=None)
    arguments = parser.parse_args()
    keras.config.set_dtype_policy(arguments.dtype)
    config = dict(CONFIG, num_hidden_layers=2 if arguments.quick else CONFIG["num_hidden_layers"])

    bert = keras_attn.build_transformer_model(config)
    roberta_plus = keras_attn.build_transformer_model(
        dict(config, attention_key_size=KEY_SIZE), variant="roberta+"
    )
    functions = {
        "BERT-base (fused)": inference(bert),
        f"RoBERTa+ key_size {KEY_SIZE} (fused)": inference(with_attention_path(roberta_plus, True)),
        f"RoBERTa+ key_size {KEY_SIZE} (einsum)": inference(with_attention_path(roberta_plus, False)),
    }
    timings = timed_side_by_side(functions, arguments.repeats)
    bert_seconds = timings["BERT-base (fused)"][1]
    rows = []
    for name, (warm_up, seconds) in timings.items():
        rows.append(
            {
                "model": name, "measurement": f"inference {BATCH}x{LENGTH}", "seconds": seconds,
                "warm_up_seconds": warm_up, "tokens_per_second": BATCH * LENGTH / seconds,
                "time_vs_bert_base": seconds / bert_seconds,
            }
        )
        print(
            f"{name:<32} {seconds * 1000:>8.1f} ms  {BATCH * LENGTH / seconds:>8.0f} tokens/s  "
            f"{seconds / bert_seconds:>5.2f}x BERT-base  (warm-up {warm_up:.1f} s)"
        )
    result = {
        "layers": config["num_hidden_layers"], "hidden": 768, "heads": 12, "head_size": 64,
        "key_size": KEY_SIZE, "dtype": arguments.dtype, "repeats": arguments.repeats,
        "default_path_for_decoupled_widths": "fused" if fuses_decoupled_widths() else "einsum",
        "rows": rows,
    }
    suffix = "" if arguments.dtype == "float32" else f"_{arguments.dtype}"
    write_result(result, arguments.output, f"fused_widths_{BACKEND}{suffix}.json")


if __name__ == "__main__":
    main()
