"""Train short, test long: position methods and the LocalMaskBaseline.

A small causal character LM is trained on sequences of 64 characters of the
standard library's source, then evaluated (next-character loss, averaged over
every position) on held-out text at lengths 64 to 1024. Methods:

- learned absolute positions (the control: rows past 64 were never trained),
- RoPE with full attention,
- RoPE + LocalMaskBaseline: the same weights, each token seeing only the
  last 64 at inference (`attention_window=64`),
- RoPE + log-n scaling (`log_n_train_length=64`),
- ALiBi, KERPLE (log), Sandwich,
- XPOS, and XPOS with blockwise causal attention (blocks of 32, so no query
  sees more than 64 keys).

    KERAS_BACKEND=jax python examples/length_extrapolation.py [--quick]

Writes length_extrapolation.{json,png} to `./keras_attn_results/` (`--output DIR`
elsewhere; `--update-results` replaces the committed ones in
`examples/results/`).
"""

import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from common import example_arguments, parse_example_arguments  # noqa: E402  (imports no Keras)


def parse_arguments(argv=None):
    parser = example_arguments(__doc__)
    parser.add_argument("--quick", action="store_true", help="one epoch, lengths up to 256")
    parser.add_argument("--epochs", type=int, default=4, help="training epochs")
    return parse_example_arguments(parser, argv)


if __name__ == "__main__":
    ARGUMENTS = parse_arguments()  # before Keras is imported: --help is instant

import keras  # noqa: E402
import numpy as np  # noqa: E402

import keras_attn  # noqa: E402
from common import Timer, source_characters, windows, write_results  # noqa: E402

TRAIN_LENGTH = 64

# label: (variant trained, inference-time overrides)
METHODS = {
    "learned absolute": ("bert", {}),
    "RoPE": ("roformer", {}),
    "RoPE + LocalMaskBaseline(64)": ("roformer", {"attention_window": TRAIN_LENGTH}),
    "RoPE + log-n": ("roformer", {"log_n_train_length": TRAIN_LENGTH}),
    "ALiBi": ("alibi", {}),
    "KERPLE (log)": ("kerple_log", {}),
    "Sandwich": ("sandwich", {}),
    "XPOS": ("xpos", {}),
    "XPOS + blockwise(32)": ("xpos", {"attention_window": TRAIN_LENGTH // 2, "blockwise_attention": True}),
}


def config(vocabulary_size, max_length):
    return dict(
        vocab_size=vocabulary_size, hidden_size=64, num_hidden_layers=2,
        num_attention_heads=4, intermediate_size=128, max_position_embeddings=max_length,
        type_vocab_size=0, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
        pad_token_id=0,
    )


def train(variant, rows, vocabulary_size, max_length, epochs):
    keras.utils.set_random_seed(0)
    model = keras_attn.build_transformer_model(
        config(vocabulary_size, max_length), variant=variant, application="lm"
    )
    model.compile(
        optimizer=keras.optimizers.Adam(2e-3),
        loss=keras_attn.TokenCrossEntropy(ignore_id=0),
        jit_compile=keras.config.backend() != "torch",
    )
    model.fit({"token_ids": rows[:, :-1]}, rows[:, 1:], batch_size=32, epochs=epochs, verbose=0)
    return model


def evaluate(model, ids, length, characters=8192):
    """Next-character loss over the first `characters` of held-out text,
    cut into rows of `length + 1`: the tail that fills no row is left out,
    so nearly the same text is scored at every length (8,064 positions at
    64 and 128, 7,168 at 1024)."""
    count = characters // (length + 1)
    rows = ids[: count * (length + 1)].reshape(count, length + 1)
    logits = model.predict({"token_ids": rows[:, :-1]}, batch_size=4, verbose=0)
    return float(
        keras_attn.TokenCrossEntropy(ignore_id=0)(rows[:, 1:], logits)
    )


def main(arguments):
    lengths = [64, 128, 256] if arguments.quick else [64, 128, 256, 512, 1024]
    epochs = 1 if arguments.quick else arguments.epochs

    ids, vocabulary = source_characters()
    split = int(0.85 * len(ids))
    train_ids, test_ids = ids[:split], ids[split:]
    rows = windows(train_ids, TRAIN_LENGTH + 1)
    if arguments.quick:
        rows = rows[:512]
    print(
        f"backend={keras.config.backend()}: {len(rows)} training windows of {TRAIN_LENGTH}, "
        f"{len(test_ids)} held-out characters"
    )

    trained, results, curves = {}, {}, {}
    weights_directory = tempfile.mkdtemp()
    for label, (variant, overrides) in METHODS.items():
        if variant not in trained:
            with Timer() as timer:
                model = train(variant, rows, len(vocabulary), max(lengths), epochs)
            path = os.path.join(weights_directory, f"{variant}.weights.h5")
            model.save_weights(path)
            trained[variant] = (path, timer.seconds)
        path, seconds = trained[variant]
        # The trained weights, rebuilt with this method's inference options.
        model = keras_attn.build_transformer_model(
            config(len(vocabulary), max(lengths)), path, variant=variant, application="lm", **overrides
        )
        losses = [evaluate(model, test_ids, length) for length in lengths]
        results[label] = {
            "variant": variant, "overrides": overrides, "training_seconds": seconds,
            "loss_by_length": dict(zip(map(str, lengths), losses)),
        }
        curves[label] = (lengths, losses)
        print(f"{label:<30} " + "  ".join(f"{length}: {loss:.3f}" for length, loss in zip(lengths, losses)))
    results["_meta"] = {"backend": keras.config.backend(), "epochs": epochs, "train_length": TRAIN_LENGTH}
    write_results(
        "length_extrapolation", results, curves, xlabel="evaluation length (characters)",
        ylabel="next-character loss (nats)", logx=True, directory=arguments.output,
    )


if __name__ == "__main__":
    main(ARGUMENTS)
