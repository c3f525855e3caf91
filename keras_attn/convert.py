"""`keras-attn-convert`: a checkpoint the builder reads, written as this
library's own files and verified against its source.

    keras-attn-convert SOURCE OUTPUT [--config FILE] [--variant NAME]
        [--application NAME] [--format {weights,keras}] [--no-verify] [--quiet]

`SOURCE` is anything `build_transformer_model` reads as a checkpoint: a
Hugging Face directory (or its `.safetensors`/`.bin` file), a Google
TensorFlow checkpoint prefix (`.../bert_model.ckpt`) or a directory holding
one. The configuration is `--config`, else the `config.json` or
`bert_config.json` beside the checkpoint.

`--format weights` (the default) writes the directory `OUTPUT` with
`config.json` (the builder's fields) and `model.weights.h5`; reload with
`build_transformer_model("OUTPUT/config.json", "OUTPUT/model.weights.h5",
variant=..., application=...)`. `--format keras` writes the single file
`OUTPUT` (ending in `.keras`); reload with `keras.saving.load_model`.

Verification (unless `--no-verify`): the written files are reloaded into a
fresh model, which must reproduce the model built from `SOURCE` exactly (to
1e-6) on a few padded inputs; for a Hugging Face source with an `"encoder"`
application, and `transformers` installed, the reloaded model's sequence
output must also equal `transformers.AutoModel`'s on the real (unpadded)
positions to 1e-4. The last line says which of these ran.

Progress goes to stderr, one line per checkpoint array read.

Exit status: 0 converted (and verified where asked), 1 an error (a missing
file, a checkpoint that does not fit: the message names the file and the
variables), 3 a verification that failed, 2 bad arguments.
"""

import argparse
import dataclasses
import json
import os
import sys
import tempfile
import time

import numpy as np

# Tolerances of the two verifications: the same arithmetic (written and
# reloaded weights), and another framework's.
ROUND_TRIP_TOLERANCE = 1e-6
REFERENCE_TOLERANCE = 1e-4


class VerificationError(Exception):
    """The converted model does not reproduce its source."""


def main(argv=None):
    """Runs the command on `argv` (default `sys.argv[1:]`); returns the exit
    status (see the module docstring)."""
    arguments = _parser().parse_args(argv)
    from keras_attn.checkpoints.readers import CheckpointError
    from keras_attn.models.input_contract import InputError

    log = _Log(quiet=arguments.quiet)
    try:
        summary = convert(
            arguments.source,
            arguments.output,
            config=arguments.config,
            variant=arguments.variant,
            application=arguments.application,
            format=arguments.format,
            verify=not arguments.verify_off,
            log=log,
        )
    except VerificationError as error:
        print(f"keras-attn-convert: verification failed: {_one_line(error)}", file=sys.stderr)
        return 3
    except (CheckpointError, InputError, FileNotFoundError, ValueError, ImportError, OSError) as error:
        print(f"keras-attn-convert: error: {_one_line(error)}", file=sys.stderr)
        return 1
    print(summary)
    return 0


def convert(source, output, config=None, variant=None, application="encoder",
            format="weights", verify=True, log=None):
    """Converts `source` to `output` (see the module docstring) and returns
    a one-line summary of what was written and verified.

    Raises:
        FileNotFoundError: no checkpoint or configuration where given or
            expected (the message names the path).
        CheckpointError: the checkpoint does not fit the configuration (the
            message names the file and the variables).
        VerificationError: the written model does not reproduce its source.
    """
    import keras

    from keras_attn.checkpoints.loading import name_table
    from keras_attn.checkpoints.porting import checkpoint_free_paths
    from keras_attn.checkpoints.porting import port_weights
    from keras_attn.checkpoints.readers import open_checkpoint
    from keras_attn.models.builder import build_transformer_model
    from keras_attn.models.transformer_config import load_config

    log = log or _Log(quiet=True)
    if format == "keras" and not output.endswith(".keras"):
        raise ValueError(f"--format keras writes a .keras file; OUTPUT is {output!r}.")
    started = time.perf_counter()
    reader = open_checkpoint(source)
    config_source = config or (source if os.path.isdir(source) else os.path.dirname(source) or ".")
    parsed = load_config(config_source)
    model = build_transformer_model(dataclasses.asdict(parsed), variant=variant, application=application)
    total = len(model.weights) - len(checkpoint_free_paths(model))
    log(f"Reading {reader.path} ({reader.format} format): {total} arrays")
    port_weights(model, _ProgressReader(reader, total, log), name_table(model, reader))

    if format == "keras":
        os.makedirs(os.path.dirname(os.path.abspath(output)), exist_ok=True)
        model.save(output)
        written = output
    else:
        os.makedirs(output, exist_ok=True)
        config_path = os.path.join(output, "config.json")
        weights_path = os.path.join(output, "model.weights.h5")
        with open(config_path, "w", encoding="utf-8") as file:
            json.dump(dataclasses.asdict(parsed), file, indent=2)
        model.save_weights(weights_path)
        written = f"{config_path} and {weights_path}"
    log(f"Wrote {written} ({time.perf_counter() - started:.1f} s)")
    if not verify:
        return f"Converted {reader.path} -> {written} (not verified)."

    if format == "keras":
        reloaded = keras.saving.load_model(output)
    else:
        reloaded = build_transformer_model(
            config_path, weights_path, variant=variant, application=application
        )
    inputs, real = _verification_inputs(model, parsed.pad_token_id)
    _compare(
        reloaded(inputs), model(inputs), ROUND_TRIP_TOLERANCE,
        f"the model reloaded from {written}", f"the model built from {reader.path}",
    )
    verified = ["the written files reproduce the model built from the checkpoint"]
    reference = _reference_output(reader, source, application, inputs, real, log)
    if reference is not None:
        sequence = keras.ops.convert_to_numpy(_sequence_output(reloaded(inputs)))
        _compare(
            sequence[real], reference[real], REFERENCE_TOLERANCE,
            f"the model reloaded from {written}", "transformers.AutoModel",
        )
        verified.append(
            f"its sequence output equals transformers.AutoModel's to {REFERENCE_TOLERANCE:g}"
        )
    return f"Converted {reader.path} -> {written}; verified: {'; '.join(verified)}."


def _parser():
    parser = argparse.ArgumentParser(
        prog="keras-attn-convert",
        description=(
            "Convert a Google TF or Hugging Face BERT-family checkpoint into a "
            "keras_attn .weights.h5 + config.json (or a .keras file), and verify it."
        ),
    )
    parser.add_argument("source", help="checkpoint: HF directory or file, TF checkpoint prefix or directory")
    parser.add_argument("output", help="output directory (--format weights) or .keras file")
    parser.add_argument("--config", help="configuration file (default: the one beside SOURCE)")
    parser.add_argument("--variant", help="builder variant (default: the config's family)")
    parser.add_argument(
        "--application", default="encoder", choices=["encoder", "mlm", "lm", "unilm"],
        help="builder application (default: encoder)",
    )
    parser.add_argument(
        "--format", default="weights", choices=["weights", "keras"],
        help="weights: OUTPUT/config.json + OUTPUT/model.weights.h5; keras: one .keras file",
    )
    parser.add_argument("--no-verify", dest="verify_off", action="store_true",
                        help="skip the comparison of the written model with its source")
    parser.add_argument("--quiet", action="store_true", help="no progress on stderr")
    return parser


class _Log:
    def __init__(self, quiet):
        self.quiet = quiet

    def __call__(self, message):
        if not self.quiet:
            print(message, file=sys.stderr, flush=True)


class _ProgressReader:
    """A `CheckpointReader` that logs each array as it is read: `[i/total]`
    for the model's variables, `[check]` for the reads that compare a tied
    copy with its original afterwards."""

    def __init__(self, reader, total, log):
        self._reader = reader
        self._total = total
        self._log = log
        self._count = 0

    def __getattr__(self, name):
        return getattr(self._reader, name)

    def __contains__(self, name):
        return name in self._reader

    def read(self, name):
        array = self._reader.read(name)
        self._count += 1
        step = f"{self._count}/{self._total}" if self._count <= self._total else "check"
        self._log(f"  [{step}] {name} {tuple(np.shape(array))}")
        return array


def _verification_inputs(model, pad, batch=2, length=16):
    """A padded batch within the model's contract (ids in range, the second
    row ending in padding) and the boolean `(batch, length)` of real tokens."""
    contract = model.input_contract
    if contract.max_length is not None:
        length = min(length, contract.max_length)
    generator = np.random.default_rng(0)
    vocabulary = contract.limits["token_ids"]
    token_ids = generator.integers(0, vocabulary, (batch, length)).astype("int32")
    token_ids[token_ids == pad] = (pad + 1) % vocabulary
    real = np.ones((batch, length), bool)
    real[1:, length // 2 :] = False
    inputs = {}
    for name, limit in contract.limits.items():
        if name == "token_ids":
            inputs[name] = np.where(real, token_ids, pad).astype("int32")
        elif name == "padding_mask":
            inputs[name] = real.astype("int32")
        else:
            inputs[name] = np.zeros((batch, length), "int32")
    return inputs, real


def _sequence_output(outputs):
    return outputs["sequence_output"] if isinstance(outputs, dict) else outputs


def _compare(actual, expected, tolerance, actual_name, expected_name):
    import keras

    actual = keras.tree.flatten(actual)
    expected = keras.tree.flatten(expected)
    for index, (left, right) in enumerate(zip(actual, expected)):
        left = keras.ops.convert_to_numpy(left)
        right = keras.ops.convert_to_numpy(right)
        difference = float(np.max(np.abs(left - right))) if left.size else 0.0
        if left.shape != right.shape or not difference <= tolerance:
            raise VerificationError(
                f"{actual_name} differs from {expected_name} (output {index}): shapes "
                f"{left.shape} and {right.shape}, largest difference {difference:.3g} "
                f"> {tolerance:g}."
            )


def _reference_output(reader, source, application, inputs, real, log):
    """`transformers.AutoModel`'s sequence output on `inputs` for a Hugging
    Face source, or None (another format, another application, or
    `transformers`/`torch` not installed)."""
    if reader.format == "tensorflow" or application != "encoder":
        return None
    try:
        import torch
        import transformers
    except ImportError:
        log("transformers/torch not installed: no comparison with the source framework.")
        return None
    directory = source if os.path.isdir(source) else os.path.dirname(source)
    transformers.logging.set_verbosity_error()
    transformers.logging.disable_progress_bar()
    reference = transformers.AutoModel.from_pretrained(directory).eval()
    feed = {
        "input_ids": torch.tensor(inputs["token_ids"], dtype=torch.long),
        "attention_mask": torch.tensor(real, dtype=torch.long),
    }
    if "segment_ids" in inputs:
        feed["token_type_ids"] = torch.tensor(inputs["segment_ids"], dtype=torch.long)
    with torch.no_grad():
        return reference(**feed).last_hidden_state.numpy()


def _one_line(error):
    return " ".join(line.strip() for line in str(error).splitlines() if line.strip())


if __name__ == "__main__":
    sys.exit(main())
