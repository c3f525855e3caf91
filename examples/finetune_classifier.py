"""Fine-tune a text classifier with `model.fit`, offline.

The task: tell which standard-library package a docstring line comes from
(`email` or `asyncio` by default), on the docstrings of your own Python
installation. With `--checkpoint DIR` the encoder starts from a pretrained
checkpoint directory (Hugging Face `config.json` + weights, or Google's
`bert_config.json` + `bert_model.ckpt`, with its `vocab.txt`); without one,
a WordPiece vocabulary is trained on the training lines and a small BERT
starts from random weights.

    KERAS_BACKEND=jax python examples/finetune_classifier.py
    python examples/finetune_classifier.py --checkpoint ~/models/bert-base-uncased
"""

import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from common import example_arguments, parse_example_arguments  # noqa: E402  (imports no Keras)


# --quick: lines per package and epochs, enough for the held-out accuracy to
# clear the majority class clearly on every backend (0.79 to 0.88 against 0.50).
# (One epoch left it at the majority class: 0.500 against 0.500.)
QUICK_LINES = 200
QUICK_EPOCHS = 5


def parse_arguments(argv=None):
    parser = example_arguments(__doc__)
    parser.add_argument("--checkpoint", help="pretrained checkpoint directory (with vocab.txt)")
    parser.add_argument(
        "--variant", default=None, help="default: from the checkpoint's config, else bert"
    )
    parser.add_argument("--cased", action="store_true", help="do not lowercase")
    parser.add_argument(
        "--packages", nargs="+", default=["email", "asyncio"],
        help="standard-library packages whose docstring lines are the classes",
    )
    parser.add_argument("--epochs", type=int, default=4, help="training epochs")
    parser.add_argument(
        "--maxlen", type=int, default=48,
        help="tokens per line, padded or truncated",
    )
    parser.add_argument("--batch-size", type=int, default=32, help="examples per training step")
    parser.add_argument(
        "--quick", action="store_true",
        help=f"{QUICK_LINES} lines per package, {QUICK_EPOCHS} epochs (20 to 60 s on 2 cores)",
    )
    return parse_example_arguments(parser, argv)


if __name__ == "__main__":
    ARGUMENTS = parse_arguments()  # before Keras is imported: --help is instant

import keras  # noqa: E402
import numpy as np  # noqa: E402

import keras_attn  # noqa: E402
from common import encode_texts, labelled_lines, train_vocabulary, write_results  # noqa: E402

SMALL_BERT = dict(
    hidden_size=128,
    num_hidden_layers=2,
    num_attention_heads=4,
    intermediate_size=256,
    max_position_embeddings=128,
    type_vocab_size=2,
)


def build_classifier(encoder, classes):
    first_token = encoder.output[:, 0]
    first_token = keras.layers.Dropout(0.1, name="Classifier-Dropout")(first_token)
    probabilities = keras.layers.Dense(classes, activation="softmax", name="Classifier")(
        first_token
    )
    return encoder.with_outputs(probabilities, name="classifier")


def main(arguments):
    keras.utils.set_random_seed(0)

    texts, labels = labelled_lines(arguments.packages, per_class=QUICK_LINES if arguments.quick else None)
    labels = np.asarray(labels)
    split = int(0.8 * len(texts))
    print(
        f"backend={keras.config.backend()}: {len(texts)} docstring lines from "
        f"{arguments.packages}, {split} for training"
    )

    if arguments.checkpoint:
        vocab = os.path.join(arguments.checkpoint, "vocab.txt")
        encoder = keras_attn.build_transformer_model(
            arguments.checkpoint, variant=arguments.variant
        )
    else:
        vocab = train_vocabulary(texts[:split], tempfile.mkdtemp())
        config = dict(SMALL_BERT, vocab_size=sum(1 for _ in open(vocab, encoding="utf-8")))
        encoder = keras_attn.build_transformer_model(config, variant=arguments.variant)
    tokenizer = keras_attn.Tokenizer(vocab, do_lower_case=not arguments.cased)
    inputs = encode_texts(tokenizer, texts, arguments.maxlen, fixed_width=True)
    train = {key: value[:split] for key, value in inputs.items()}
    test = {key: value[split:] for key, value in inputs.items()}

    model = build_classifier(encoder, len(arguments.packages))
    epochs = QUICK_EPOCHS if arguments.quick else arguments.epochs
    steps = epochs * -(-split // arguments.batch_size)
    learning_rate = 5e-5 if arguments.checkpoint else 1e-3
    model.compile(
        optimizer=keras.optimizers.AdamW(
            keras.optimizers.schedules.CosineDecay(
                0.0, steps, warmup_target=learning_rate, warmup_steps=steps // 10
            )
        ),
        loss="sparse_categorical_crossentropy",
        metrics=["accuracy"],
        jit_compile=keras.config.backend() != "torch",
    )
    history = model.fit(
        train, labels[:split], validation_data=(test, labels[split:]),
        batch_size=arguments.batch_size, epochs=epochs,
    )
    _, accuracy = model.evaluate(test, labels[split:], verbose=0)
    majority = max(np.mean(labels[split:] == c) for c in range(len(arguments.packages)))
    verdict = (
        "the classifier learned the task"
        if accuracy > majority + 0.05
        else "no better than always answering the majority class: train longer"
    )
    print(f"held-out accuracy {accuracy:.3f} (majority class {majority:.3f}): {verdict}")
    epochs_axis = list(range(1, epochs + 1))
    write_results(
        "finetune_classifier",
        {
            "held_out_accuracy": float(accuracy),
            "majority_class": float(majority),
            "history": {k: [float(v) for v in values] for k, values in history.history.items()},
            "_meta": {"backend": keras.config.backend(), "quick": arguments.quick,
                      "checkpoint": arguments.checkpoint, "packages": arguments.packages},
        },
        {
            "training accuracy": (epochs_axis, history.history["accuracy"]),
            "held-out accuracy": (epochs_axis, history.history["val_accuracy"]),
        },
        xlabel="epoch", ylabel="accuracy", directory=arguments.output,
    )


if __name__ == "__main__":
    main(ARGUMENTS)
