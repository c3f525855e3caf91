"""What the input contract costs: BERT-base with and without its checks.

In one process, on the backend KERAS_BACKEND selects, this times
keras_attn's BERT-base (the `TransformerModel` the builder returns, which
checks names, dtypes, id ranges and lengths before every compiled step)
against a plain `keras.Model` over the same graph and the same weights,
which checks nothing: `predict_on_batch` at 8 x 128 and 2 x 512 and
`train_on_batch` at 8 x 128, jit-compiled on TensorFlow and JAX, the two
taking turns within each repetition (medians of `--repeats` runs after a
warm-up). Results go to `benchmarks/results/input_contract_<backend>.json`.

    KERAS_BACKEND=jax python benchmarks/input_contract.py

Not part of the test suite.
"""

import argparse

import keras

import keras_attn
from bert_base import CONFIG
from bert_base import SHAPES
from bert_base import keras_runner
from bert_base import mode_of
from bert_base import timed_side_by_side
from bert_base import write_result

NAMES = {"tokens": "token_ids", "segments": "segment_ids"}
# The steps `fit` and `predict` run (the checks are made before them).
STEPS = {label: shape for label, shape in SHAPES.items() if mode_of(label) != "call"}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--output", default=None)
    arguments = parser.parse_args()

    checked = keras_attn.build_transformer_model(CONFIG, dropout_rate=0.1)
    unchecked = keras.Model(checked.input, checked.output)
    functions = {}
    for name, model in (("checked", checked), ("unchecked", unchecked)):
        make = keras_runner(model, NAMES)
        for label, (batch, length) in STEPS.items():
            functions[name, label] = make(batch, length, mode_of(label))
    timings = timed_side_by_side(functions, arguments.repeats)
    rows = []
    for label in STEPS:
        with_checks = timings["checked", label][1]
        without = timings["unchecked", label][1]
        rows.append(
            {"measurement": label, "checked_seconds": with_checks,
             "unchecked_seconds": without, "checked_vs_unchecked": with_checks / without}
        )
        print(
            f"{label:<17} checked {with_checks * 1000:>7.1f} ms  unchecked "
            f"{without * 1000:>7.1f} ms  ratio {with_checks / without:.3f}"
        )
    write_result(
        {"repeats": arguments.repeats, "rows": rows},
        arguments.output,
        f"input_contract_{keras.config.backend()}.json",
    )


if __name__ == "__main__":
    main()
