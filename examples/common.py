"""What the examples share: real text that exists on every machine with
Python (the standard library's own source and docstrings), the synthetic
attention tasks, and writing results (JSON + PNG). Nothing is downloaded."""

import ast
import json
import os
import random
import sysconfig
import time

import numpy as np

RESULTS_DIRECTORY = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")


def standard_library_root():
    return sysconfig.get_paths()["stdlib"]


def docstring_lines(package, min_words=4):
    """Docstring lines of every module of a standard-library package,
    read from the source files with `ast` (nothing is imported)."""
    root = os.path.join(standard_library_root(), package)
    paths = []
    for directory, _, files in os.walk(root):
        if "test" in directory.split(os.sep):
            continue
        paths.extend(os.path.join(directory, f) for f in sorted(files) if f.endswith(".py"))
    lines = []
    for path in sorted(paths):
        with open(path, encoding="utf-8") as file:
            try:
                tree = ast.parse(file.read())
            except SyntaxError:
                continue
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
    (x values, y values)), a `<name>.png` plot, under `examples/results/`."""
    directory = directory or RESULTS_DIRECTORY
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, name + ".json"), "w") as file:
        json.dump(results, file, indent=2, sort_keys=True)
    if curves:
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
        figure.savefig(os.path.join(directory, name + ".png"), dpi=110)
        plt.close(figure)
    return directory


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
    directory = write_results(
        name, results, curves, xlabel="epoch", ylabel="validation MSE", logy=True,
        directory=output,
    )
    print(f"wrote {directory}/{name}.json and .png")
    return results
