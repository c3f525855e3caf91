"""Conditional LayerNorm: a character LM of docstrings, conditioned on the package they come from.

bert4keras's conditional generation (`layer_norm_cond`, as in its
`task_conditional_language_model` example), offline: every docstring line
of a few standard-library packages is a training sequence, and the package
it comes from, as a one-hot vector, is the model's `condition` input. The
builder's `conditional_layer_norm=<packages>` makes every LayerNorm of a
small causal LM a `ConditionalLayerNormalization`, whose scale and shift the
condition moves (zero-initialised: at step 0 the condition changes nothing).
Training uses `fit`, `keras_attn.TokenCrossEntropy` and the piecewise-linear
learning rate of `keras_attn.optimizers.PiecewiseLinearSchedule` (warm-up,
then decay, as bert4keras's `extend_with_piecewise_linear_lr`).

Held-out lines (a tenth of every package's lines, never trained on) are
scored as per-character negative log-likelihood twice: with their true
package as the condition, and with the condition of another package
(shuffled). If the model uses the condition, the true one scores better.

Then, as bert4keras's script does, lines are sampled for each package with
`keras_attn.AutoRegressiveDecoder.random_sample([[], condition], n,
topp=...)` (an empty prompt: every line starts from the `[BOS]` start id,
as bert4keras's start from `[CLS]`). A character-bigram naive Bayes
classifier, trained on the same training lines and independent of the
model, names the package of each sample: the fraction it gives the
condition's package is compared with chance (1 in 6) and with the
classifier's accuracy on real held-out lines (its ceiling).

    KERAS_BACKEND=jax python examples/bert4keras/conditional_layer_norm.py [--quick]

Writes conditional_layer_norm.json to `./keras_attn_results/` (`--output DIR`
elsewhere; `--update-results` replaces the committed ones in
`examples/results/`).
"""

import os
import random
import sys
import time
from collections import Counter

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from common import example_arguments, parse_example_arguments  # noqa: E402  (imports no Keras)


def parse_arguments(argv=None):
    parser = example_arguments(__doc__)
    parser.add_argument("--quick", action="store_true", help="fewer lines, a smaller model")
    return parse_example_arguments(parser, argv)


if __name__ == "__main__":
    ARGUMENTS = parse_arguments()  # before Keras is imported: --help is instant

import keras  # noqa: E402
import numpy as np  # noqa: E402

import keras_attn  # noqa: E402
from common import Timer, docstring_lines, write_results  # noqa: E402

PACKAGES = ("email", "unittest", "asyncio", "xml", "logging", "http")
LENGTH = 64  # tokens per line: [BOS], then characters
BOS = 2
HELD_OUT_FRACTION = 0.1


def dataset(quick, seed=0):
    """Lines `(count, LENGTH + 1)` of ids, `[BOS]` then the characters (0
    pads), their package labels, and the lines as text, split into training
    and held-out lines per package."""
    per_package = 120 if quick else 2000
    lines = {package: docstring_lines(package) for package in PACKAGES}
    characters = sorted({c for package_lines in lines.values() for line in package_lines for c in line})
    vocabulary = ["[PAD]", "[UNK]", "[BOS]"] + characters
    index = {c: i for i, c in enumerate(vocabulary)}
    rng = random.Random(seed)
    split = {"train": ([], [], []), "held_out": ([], [], [])}
    for label, package in enumerate(PACKAGES):
        package_lines = sorted(set(lines[package]))
        rng.shuffle(package_lines)
        package_lines = package_lines[:per_package]
        held_out = max(1, int(len(package_lines) * HELD_OUT_FRACTION))
        for part, chosen in (("held_out", package_lines[:held_out]), ("train", package_lines[held_out:])):
            for line in chosen:
                ids = [BOS] + [index.get(c, 1) for c in line[:LENGTH]]
                split[part][0].append(ids + [0] * (LENGTH + 1 - len(ids)))
                split[part][1].append(label)
                split[part][2].append(line[:LENGTH])
    arrays = {}
    for part, (rows, labels, texts) in split.items():
        order = np.random.default_rng(seed).permutation(len(rows))
        arrays[part] = (
            np.array(rows, "int32")[order], np.array(labels, "int32")[order],
            [texts[i] for i in order],
        )
    return arrays, vocabulary


def one_hot(labels):
    return np.eye(len(PACKAGES), dtype="float32")[labels]


def inputs(rows, labels):
    return {"token_ids": rows[:, :-1], "condition": one_hot(labels)}


def nll_per_character(model, rows, labels):
    """Mean negative log-likelihood (nats) of the held-out characters."""
    logits = model.predict(inputs(rows, labels), batch_size=64, verbose=0).astype("float64")
    targets = rows[:, 1:]
    logits -= logits.max(axis=-1, keepdims=True)
    log_probabilities = logits - np.log(np.exp(logits).sum(axis=-1, keepdims=True))
    chosen = np.take_along_axis(log_probabilities, targets[..., None], axis=-1)[..., 0]
    real = targets != 0
    return float(-(chosen * real).sum() / real.sum())


class BigramClassifier:
    """Character-bigram naive Bayes over the packages, add-one smoothed: the
    package of a line is `argmax_c log p(c) + sum log p(b | c)` over its
    bigrams `b` (with a start and an end mark)."""

    def __init__(self, texts, labels):
        self.counts = [Counter() for _ in PACKAGES]
        for text, label in zip(texts, labels):
            self.counts[label].update(self.bigrams(text))
        self.vocabulary = len(set().union(*self.counts)) + 1
        self.totals = [sum(counts.values()) for counts in self.counts]
        self.priors = np.log(np.bincount(labels, minlength=len(PACKAGES)) / len(labels))

    @staticmethod
    def bigrams(text):
        text = "\x02" + text + "\x03"
        return [text[i : i + 2] for i in range(len(text) - 1)]

    def predict(self, text):
        scores = [
            prior + sum(np.log((counts[b] + 1) / (total + self.vocabulary)) for b in self.bigrams(text))
            for prior, counts, total in zip(self.priors, self.counts, self.totals)
        ]
        return int(np.argmax(scores))


def sample_lines(model, vocabulary, count, maxlen, seed):
    """`count` lines sampled per package (top-p 0.95, as bert4keras's script),
    as text, with their package labels."""
    decoder = keras_attn.AutoRegressiveDecoder(model, start_id=BOS, maxlen=maxlen)
    texts, labels = [], []
    for label in range(len(PACKAGES)):
        samples = decoder.random_sample([[], one_hot(label)], n=count, topp=0.95, seed=seed + label)
        texts.extend("".join(vocabulary[i] for i in ids[1:] if i > BOS) for ids in samples)
        labels.extend([label] * count)
    return texts, np.array(labels)


def main(arguments):
    quick = arguments.quick
    print(f"backend={keras.config.backend()}", flush=True)
    with Timer() as total:
        arrays, vocabulary = dataset(quick)
        train_rows, train_labels, train_texts = arrays["train"]
        test_rows, test_labels, test_texts = arrays["held_out"]
        epochs, batch_size = (10, 32) if quick else (6, 64)
        hidden, layers = (32, 1) if quick else (128, 2)
        print(
            f"{len(train_rows)} training and {len(test_rows)} held-out docstring lines of "
            f"{len(PACKAGES)} packages {PACKAGES}; {len(vocabulary)} characters; "
            f"{epochs} epoch(s)",
            flush=True,
        )
        keras.utils.set_random_seed(0)
        config = dict(
            vocab_size=len(vocabulary), hidden_size=hidden, num_hidden_layers=layers,
            num_attention_heads=4, intermediate_size=2 * hidden,
            max_position_embeddings=LENGTH, type_vocab_size=0,
            hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
        )
        model = keras_attn.build_transformer_model(
            config, application="lm", conditional_layer_norm=len(PACKAGES)
        )
        steps = epochs * -(-len(train_rows) // batch_size)
        schedule = keras_attn.optimizers.PiecewiseLinearSchedule(
            1e-2 if quick else 3e-3, {max(1, steps // 10): 1.0, steps: 0.1}
        )
        model.compile(
            optimizer=keras.optimizers.Adam(schedule),
            loss=keras_attn.TokenCrossEntropy(ignore_id=0),
            jit_compile=keras.config.backend() != "torch",
        )
        untrained = nll_per_character(model, test_rows, test_labels)
        with Timer() as training:
            history = model.fit(
                inputs(train_rows, train_labels), train_rows[:, 1:],
                batch_size=batch_size, epochs=epochs, verbose=2,
            )
        # Another package's condition for every held-out line.
        shuffled_labels = (test_labels + 1 + np.arange(len(test_labels)) % (len(PACKAGES) - 1)) % len(PACKAGES)
        true_condition = nll_per_character(model, test_rows, test_labels)
        shuffled_condition = nll_per_character(model, test_rows, shuffled_labels)
        classifier = BigramClassifier(train_texts, train_labels)
        classifier_accuracy = float(np.mean([classifier.predict(t) == y for t, y in zip(test_texts, test_labels)]))
        per_package = 50 if quick else 200
        with Timer() as sampling:
            samples, sample_labels = sample_lines(model, vocabulary, per_package, 48, seed=0)
        agreement = float(np.mean([classifier.predict(t) == y for t, y in zip(samples, sample_labels)]))
    results = {
        "packages": list(PACKAGES),
        "train_lines": len(train_rows),
        "held_out_lines": len(test_rows),
        "epochs": epochs,
        "hidden_size": hidden,
        "num_hidden_layers": layers,
        "loss": [float(v) for v in history.history["loss"]],
        "held_out_nll_untrained": untrained,
        "held_out_nll_true_condition": true_condition,
        "held_out_nll_shuffled_condition": shuffled_condition,
        "samples_per_package": per_package,
        "sample_classifier_agreement": agreement,
        "classifier_held_out_accuracy": classifier_accuracy,
        "chance": 1 / len(PACKAGES),
        "sample_examples": {
            PACKAGES[label]: samples[label * per_package] for label in range(len(PACKAGES))
        },
        "training_seconds": training.seconds,
        "sampling_seconds": sampling.seconds,
        "_meta": {"backend": keras.config.backend(), "quick": quick,
                  "seconds": total.seconds, "cpu_seconds": time.process_time()},
    }
    print(
        f"held-out NLL per character: {true_condition:.4f} nats with the true package, "
        f"{shuffled_condition:.4f} with another package's (untrained: {untrained:.4f})"
    )
    print(
        f"sampled lines named after their condition's package by a bigram classifier: "
        f"{agreement:.3f} (chance {1 / len(PACKAGES):.3f}; the classifier on real held-out "
        f"lines: {classifier_accuracy:.3f})"
    )
    write_results("conditional_layer_norm", results, directory=arguments.output)
    print(f"{total.seconds:.0f} s in all")


if __name__ == "__main__":
    main(ARGUMENTS)
