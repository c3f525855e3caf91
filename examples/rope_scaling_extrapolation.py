"""Extending a trained RoPE model without retraining: PI, NTK, YaRN, ReRoPE.

Reproduces, at a size a CPU trains in minutes, the comparison of Su's
"Transformer upgrade road" posts (https://kexue.fm/archives/9708): one small
causal character LM with RoPE is trained on sequences of 128 characters of the
standard library's source, then read at 128, 512 and 1024 characters of
held-out source with each method applied at inference only (the same
weights, rebuilt with another `rope_scaling` / `log_n_train_length`):

- Baseline (plain RoPE) and Baseline-logn (log-n scaling, train length 128),
- PI (`linear`), NTK (`ntk`, the fixed NTK-aware base) and NTK-logn,
  NTK-mixed (`ntk` with `exponent` 0.625) and NTK-mixed-logn, YaRN
  (`yarn`), each with factor 8 = 1024 / 128, fixed over the lengths as in
  Su's table,
- ReRoPE with windows 32 and 48 (below half the training length), ReRoPE-w32
  with log-n, Leaky ReRoPE (window 32, k 16) with log-n,
- ReRoPE with the window at the training length (128), which Su reports to
  collapse.

Next-character accuracy and loss are averaged over every scored position of
the first 8,192 held-out characters, cut into rows of the length plus one;
the tail that fills no row is left out, so 8,064, 7,680 and 7,168 positions
are scored at 128, 512 and 1024 (nearly the same text at every length).

`--quick` is a smoke test that every method runs (one epoch on 512 windows,
read at 128 and 256): its barely trained model puts every method within 0.2
points of the others, so it shows no ordering.

    KERAS_BACKEND=jax python examples/rope_scaling_extrapolation.py [--quick]

Writes rope_scaling_extrapolation.{json,png} to `./keras_attn_results/`
(`--output DIR` elsewhere; `--update-results` replaces the committed ones in
`examples/results/`).
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from common import example_arguments, parse_example_arguments  # noqa: E402  (imports no Keras)


def parse_arguments(argv=None):
    parser = example_arguments(__doc__)
    parser.add_argument(
        "--quick", action="store_true",
        help="a smoke test: one epoch on 512 windows, lengths 128 and 256 (shows no ordering)",
    )
    parser.add_argument("--epochs", type=int, default=6, help="training epochs")
    return parse_example_arguments(parser, argv)


if __name__ == "__main__":
    ARGUMENTS = parse_arguments()  # before Keras is imported: --help is instant

import keras  # noqa: E402
import numpy as np  # noqa: E402

import keras_attn  # noqa: E402
from common import Timer, source_characters, windows, write_results  # noqa: E402

TRAIN_LENGTH = 128
FACTOR = 8
MODULES = ("argparse", "textwrap", "string", "json/decoder", "json/encoder", "inspect", "dataclasses")


def rerope(window, k=None):
    if k is None:
        return {"rope_type": "rerope", "window": window}
    return {"rope_type": "leaky_rerope", "window": window, "k": k}


LOG_N = {"log_n_train_length": TRAIN_LENGTH}
# label: inference-time overrides of the one trained model.
METHODS = {
    "Baseline": {},
    "Baseline-logn": LOG_N,
    "PI": {"rope_scaling": {"rope_type": "linear", "factor": FACTOR}},
    "NTK": {"rope_scaling": {"rope_type": "ntk", "factor": FACTOR}},
    "NTK-logn": {"rope_scaling": {"rope_type": "ntk", "factor": FACTOR}, **LOG_N},
    "NTK-mixed": {"rope_scaling": {"rope_type": "ntk", "factor": FACTOR, "exponent": 0.625}},
    "NTK-mixed-logn": {"rope_scaling": {"rope_type": "ntk", "factor": FACTOR, "exponent": 0.625},
                       **LOG_N},
    "YaRN": {"rope_scaling": {"rope_type": "yarn", "factor": FACTOR,
                              "original_max_position_embeddings": TRAIN_LENGTH}},
    "ReRoPE-w32": {"rope_scaling": rerope(32)},
    "ReRoPE-w48": {"rope_scaling": rerope(48)},
    "ReRoPE-w32-logn": {"rope_scaling": rerope(32), **LOG_N},
    "Leaky-ReRoPE-w32-k16-logn": {"rope_scaling": rerope(32, 16), **LOG_N},
    "ReRoPE-w128 (window = training length)": {"rope_scaling": rerope(TRAIN_LENGTH)},
}


def config(vocabulary_size, max_length):
    return dict(
        vocab_size=vocabulary_size, hidden_size=128, num_hidden_layers=2,
        num_attention_heads=4, intermediate_size=256, max_position_embeddings=max_length,
        type_vocab_size=0, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
        pad_token_id=0,
    )


def train(rows, vocabulary_size, max_length, epochs):
    keras.utils.set_random_seed(0)
    model = keras_attn.build_transformer_model(
        config(vocabulary_size, max_length), variant="roformer", application="lm"
    )
    model.compile(
        optimizer=keras.optimizers.Adam(2e-3),
        loss=keras_attn.TokenCrossEntropy(ignore_id=0),
        jit_compile=keras.config.backend() != "torch",
    )
    model.fit({"token_ids": rows[:, :-1]}, rows[:, 1:], batch_size=32, epochs=epochs, verbose=0)
    return model


def evaluate(model, ids, length, characters=8192):
    """(accuracy, loss) of the next character over the first `characters`
    of held-out text, cut into rows of `length + 1` (the tail that fills no
    row is left out)."""
    count = characters // (length + 1)
    rows = ids[: count * (length + 1)].reshape(count, length + 1)
    logits = model.predict({"token_ids": rows[:, :-1]}, batch_size=4, verbose=0)
    targets = rows[:, 1:]
    accuracy = float(np.mean(np.argmax(logits, axis=-1) == targets))
    loss = float(keras_attn.TokenCrossEntropy(ignore_id=0)(targets, logits))
    return accuracy, loss


def main(arguments):
    lengths = [128, 256] if arguments.quick else [128, 512, 1024]
    epochs = 1 if arguments.quick else arguments.epochs

    ids, vocabulary = source_characters(MODULES)
    split = int(0.9 * len(ids))
    train_ids, test_ids = ids[:split], ids[split:]
    rows = windows(train_ids, TRAIN_LENGTH + 1)
    if arguments.quick:
        rows = rows[:512]
    print(
        f"backend={keras.config.backend()}: {len(rows)} training windows of {TRAIN_LENGTH}, "
        f"{len(test_ids)} held-out characters"
    )
    with Timer() as timer:
        trained = train(rows, len(vocabulary), max(lengths), epochs)
    print(f"trained in {timer.seconds:.0f} s")
    if arguments.quick:
        print("--quick: a smoke test that every method runs; one epoch of training leaves the "
              "methods within about 0.2 points of each other, so the numbers show no ordering")

    results, curves = {}, {}
    for label, overrides in METHODS.items():
        # The trained weights, rebuilt with this method's inference options.
        model = keras_attn.build_transformer_model(
            config(len(vocabulary), max(lengths)), variant="roformer", application="lm",
            **overrides,
        )
        model.set_weights(trained.get_weights())
        scores = [evaluate(model, test_ids, length) for length in lengths]
        results[label] = {
            "overrides": overrides,
            "accuracy_by_length": {str(n): a for n, (a, _) in zip(lengths, scores)},
            "loss_by_length": {str(n): loss for n, (_, loss) in zip(lengths, scores)},
        }
        curves[label] = (lengths, [a for a, _ in scores])
        print(f"{label:<40} " + "  ".join(
            f"{n}: {100 * a:5.2f}% ({loss:.3f})" for n, (a, loss) in zip(lengths, scores)
        ))
    results["_meta"] = {
        "backend": keras.config.backend(), "epochs": epochs, "train_length": TRAIN_LENGTH,
        "training_seconds": timer.seconds, "training_windows": len(rows),
        "held_out_characters": len(test_ids), "factor": FACTOR,
    }
    write_results(
        "rope_scaling_extrapolation", results, curves, xlabel="evaluation length (characters)",
        ylabel="next-character accuracy", logx=True, directory=arguments.output,
    )


if __name__ == "__main__":
    main(ARGUMENTS)
