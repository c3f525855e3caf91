"""`keras-attn-convert`: a checkpoint the builder reads, written as this
library's own files and verified against its source.

    keras-attn-convert SOURCE OUTPUT [--config FILE] [--variant NAME]
        [--application NAME] [--format {weights,keras}] [--overwrite]
        [--no-verify] [--quiet]

The console script is `keras_attn_cli.convert`, which parses the arguments
before importing keras_attn and then calls `run` here.

`SOURCE` is anything `build_transformer_model` reads as a checkpoint (a
Hugging Face directory or file of a family in
`keras_attn.checkpoints.families`, a TensorFlow checkpoint prefix or its
directory). The configuration is `--config`, else the `config.json` or
`bert_config.json` beside it. `--variant` and `--application` default to
the config's variant and that variant's first application (`"lm"` for a
decoder's config; the family's `architecture_applications` for a Hugging
Face class whose head another application holds). Checkpoint weights the
converted model lacks are listed in the summary line.

`--format weights` (the default) writes the directory `OUTPUT` with
`config.json` and `model.weights.h5`; `--format keras` writes the single
file `OUTPUT` (ending in `.keras`). The command ends by printing the lines
that reload them. Writing is all or nothing (`keras_attn.files`); other
files in an OUTPUT directory are kept.

Before anything is read, OUTPUT is checked: it must be writable (missing
parents are created); it must not be or contain SOURCE's or the
`--config` file's directory; a directory holding another checkpoint's files
is refused unless `--overwrite` (a directory this command wrote is replaced).

Verification (unless `--no-verify`): the written files, reloaded, must
reproduce the model built from `SOURCE` to 1e-6 on a small padded batch;
for a Hugging Face source with `transformers` installed, also the
`transformers` model's output (the family's `references`) on the real
positions to 1e-4 or 1e-5 of its largest |output|, whichever is larger.

Progress goes to stderr. Exit status: 0 converted (and verified where
asked), 1 an error (the message names the file, variables or OUTPUT), 2 bad
arguments, 3 a verification that failed.
"""

import json
import os
import sys
import time

import numpy as np

import keras_attn_cli
from keras_attn.files import atomic_directory
from keras_attn.files import atomic_write

# Tolerances of the two verifications: the same arithmetic (written and
# reloaded weights), and another framework's, which is relative to the
# outputs' scale: `max(REFERENCE_TOLERANCE, REFERENCE_RELATIVE_TOLERANCE *
# max|reference output|)` (float32 rounding grows with the size of the
# logits: mT5's reach 27, where TensorFlow and torch differ by 1e-4).
ROUND_TRIP_TOLERANCE = 1e-6
REFERENCE_TOLERANCE = 1e-4
REFERENCE_RELATIVE_TOLERANCE = 1e-5

# Our input names -> the keywords `transformers` models take them by.
REFERENCE_INPUT_NAMES = {
    "token_ids": ("input_ids", "attention_mask"),
    "encoder_token_ids": ("input_ids", "attention_mask"),
    "decoder_token_ids": ("decoder_input_ids", "decoder_attention_mask"),
    "segment_ids": ("token_type_ids", None),
}


class VerificationError(Exception):
    """The converted model does not reproduce its source."""


def main(argv=None):
    """Runs the command on `argv` (default `sys.argv[1:]`); returns the exit
    status (see the module docstring)."""
    return keras_attn_cli.convert(argv)


def run(arguments):
    """Runs the command on parsed `arguments` (`keras_attn_cli.
    convert_parser`'s); returns the exit status and prints what it wrote,
    or the error in one line on stderr."""
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
            overwrite=arguments.overwrite,
            log=log,
        )
    except VerificationError as error:
        print(f"keras-attn-convert: verification failed: {keras_attn_cli.one_line(error)}", file=sys.stderr)
        return 3
    except (CheckpointError, InputError, FileNotFoundError, ValueError, ImportError, OSError) as error:
        print(f"keras-attn-convert: error: {keras_attn_cli.one_line(error)}", file=sys.stderr)
        return 1
    print(summary)
    print(reload_snippet(arguments.output, arguments.format, arguments.variant, arguments.application))
    return 0


def reload_snippet(output, format, variant=None, application=None):
    """The Python lines that load what `convert` wrote to `output`, with
    the `variant` and `application` given on the command line."""
    if format == "keras":
        return (
            "Reload it in Python (import keras_attn first: Keras finds only the classes "
            "it registers):\n"
            "    import keras\n"
            "    import keras_attn\n"
            f"    model = keras.saving.load_model({output!r})"
        )
    options = "".join(
        f", {name}={value!r}"
        for name, value in (("variant", variant), ("application", application))
        if value is not None
    )
    config_path = os.path.join(output, "config.json")
    weights_path = os.path.join(output, "model.weights.h5")
    return (
        "Reload it in Python:\n"
        "    import keras_attn\n"
        f"    model = keras_attn.build_transformer_model({config_path!r}, {weights_path!r}{options})"
    )


def convert(source, output, config=None, variant=None, application=None,
            format="weights", verify=True, overwrite=False, log=None):
    """Converts `source` to `output` (see the module docstring) and returns
    a one-line summary of what was written and verified.

    Raises:
        FileNotFoundError: no checkpoint or configuration where given or
            expected (the message names the path).
        ValueError: `output` would overwrite a file the run reads, or is a
            directory holding another checkpoint's files and `overwrite` is
            False (the message names the directory and the files).
        OSError: `output` cannot be written (the message names it and says
            why: a file where a directory is needed, a directory that is
            not writable, a full disk).
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
    from keras_attn.models.config_files import load_config

    log = log or _Log(quiet=True)
    if format == "keras" and not output.endswith(".keras"):
        raise ValueError(f"--format keras writes a .keras file; OUTPUT is {output!r}.")
    config_source = config or _source_directory(source)
    _check_output(source, config_source, output, format)
    _check_output_location(output, format)
    replaced = _other_checkpoint_files(output) if format == "weights" else []
    if replaced and not overwrite:
        raise ValueError(
            f"OUTPUT {output!r} holds another checkpoint's files: {', '.join(replaced)}. "
            "Writing its config.json and model.weights.h5 there would replace or sit "
            "beside files of another model. Choose a new OUTPUT directory, or pass "
            "--overwrite to replace these files (the directory's other files are kept)."
        )
    started = time.perf_counter()
    reader = open_checkpoint(source)
    parsed = load_config(config_source)
    if application is None:
        application = _saved_application(config_source, parsed, variant)
    log(f"Building the model from the configuration in {config_source}")
    model = build_transformer_model(parsed.to_dict(), variant=variant, application=application)
    total = len(model.weights) - len(checkpoint_free_paths(model))
    log(f"Reading {reader.path} ({reader.format} format): {total} arrays")
    heads_left_out = port_weights(
        model, _ProgressReader(reader, total, log), name_table(model, reader)
    )
    left_out = ""
    if heads_left_out:
        left_out = (
            f" Left out {len(heads_left_out)} checkpoint weights of heads that "
            f"application={model.application!r} does not have "
            f"({', '.join(heads_left_out[:4])}{', ...' if len(heads_left_out) > 4 else ''}); "
            "pass --application to convert a model with them."
        )
        log(left_out.strip())

    log(f"Writing {output}")
    try:
        os.makedirs(os.path.dirname(os.path.abspath(output)), exist_ok=True)
        if format == "keras":
            _write_keras_file(model, output)
        else:
            _write_weights_directory(model, parsed, output, leave_out=replaced)
    except OSError as error:
        reason = _unwritable_reason(output, format) or error.strerror or str(error)
        raise OSError(f"Cannot write OUTPUT {output!r}: {reason}.") from error
    if format == "keras":
        written = output
    else:
        config_path = os.path.join(output, "config.json")
        weights_path = os.path.join(output, "model.weights.h5")
        written = f"{config_path} and {weights_path}"
    log(f"Wrote {written} ({time.perf_counter() - started:.1f} s)")
    if not verify:
        return f"Converted {reader.path} -> {written} (not verified).{left_out}"

    log(f"Verifying: reloading {written} and comparing it with the model built from the checkpoint")
    if format == "keras":
        reloaded = keras.saving.load_model(output)
    else:
        reloaded = build_transformer_model(
            config_path, weights_path, variant=variant, application=application
        )
    inputs, real = _verification_inputs(model, parsed)
    _compare(
        reloaded(inputs), model(inputs), ROUND_TRIP_TOLERANCE,
        f"the model reloaded from {written}", f"the model built from {reader.path}",
    )
    verified = ["the written files reproduce the model built from the checkpoint"]
    reference = _reference_output(reader, source, model, inputs, real, log)
    if reference is not None:
        reference_name, field, expected = reference
        # The output's positions are those of the last ids input: the
        # decoder's for an encoder-decoder.
        positions = list(real.values())[-1]
        actual = keras.ops.convert_to_numpy(_sequence_output(reloaded(inputs)))
        tolerance = max(
            REFERENCE_TOLERANCE,
            REFERENCE_RELATIVE_TOLERANCE * float(np.abs(expected[positions]).max(initial=0.0)),
        )
        _compare(
            actual[positions], expected[positions], tolerance,
            f"the model reloaded from {written}", reference_name,
        )
        verified.append(
            f"its output equals {reference_name}'s {field} on the real positions "
            f"to {tolerance:.3g}"
        )
    return f"Converted {reader.path} -> {written}; verified: {'; '.join(verified)}.{left_out}"


def _saved_application(config_source, config, variant):
    """The application that holds the head of the Hugging Face class the
    checkpoint was saved from (its config's `architectures`, see
    the families' `architecture_applications`), when the variant builds it;
    else None (the builder's default)."""
    from keras_attn.checkpoints import families
    from keras_attn.models.builder import select_variant
    from keras_attn.models.registry import VARIANTS
    from keras_attn.models.config_files import find_config_file

    path = find_config_file(config_source) if os.path.isdir(config_source) else config_source
    if path is None or not os.path.isfile(path):
        return None
    with open(path, encoding="utf-8") as file:
        architectures = json.load(file).get("architectures") or []
    applications = VARIANTS[select_variant(config, variant)].applications
    for architecture in architectures:
        application = families.application_for_architecture(architecture)
        if application in applications:
            return application
    return None


def _write_keras_file(model, output):
    """Saves `model` to the `.keras` file `output` whole (see
    `keras_attn.files.atomic_write`): a failure mid-write leaves any
    previous `output` as it was."""
    with atomic_write(output) as temporary:
        model.save(temporary)


def _write_weights_directory(model, config, output, leave_out=()):
    """Writes `output/config.json` and `output/model.weights.h5` as one
    change of `output` (`keras_attn.files.atomic_directory`), keeping its
    other files except `leave_out`."""
    with atomic_directory(output, leave_out=leave_out) as staging:
        with open(os.path.join(staging, "config.json"), "w", encoding="utf-8") as file:
            json.dump(config.to_dict(), file, indent=2)
        model.save_weights(os.path.join(staging, "model.weights.h5"))


def _source_directory(source):
    """The directory a run reads `source` from: the checkpoint's files, the
    configuration beside them, and what `transformers` loads for the
    reference comparison."""
    return source if os.path.isdir(source) else os.path.dirname(source) or "."


def _check_output_location(output, format):
    """Raises an OSError naming `output` where it cannot be written, as far
    as can be told before anything is read (see `_unwritable_reason`)."""
    reason = _unwritable_reason(output, format)
    if reason is not None:
        raise OSError(f"Cannot write OUTPUT {output!r}: {reason}.")


def _unwritable_reason(output, format):
    """Why `output` cannot be written (a file where a directory goes or the
    other way round, a file among its parents, an unwritable directory), or
    None."""
    path = os.path.abspath(output)
    if format == "weights" and os.path.isfile(path):
        return "it is a file; --format weights writes a directory (config.json and model.weights.h5)"
    if format == "keras" and os.path.isdir(path):
        return "it is a directory; --format keras writes one .keras file"
    parent = ancestor = os.path.dirname(path)
    while not os.path.lexists(ancestor):
        ancestor = os.path.dirname(ancestor)
    if not os.path.isdir(ancestor):
        return f"{ancestor!r} is a file, not a directory"
    where = (
        f"its directory {parent!r}" if ancestor == parent
        else f"its directory {parent!r} does not exist, and {ancestor!r}, where it would be created,"
    )
    if hasattr(os, "statvfs") and os.statvfs(ancestor).f_flag & os.ST_RDONLY:
        return f"{where} is on a read-only file system"
    if not os.access(ancestor, os.W_OK | os.X_OK):
        return f"{where} is not writable (permission denied)"
    return None


# The files of another checkpoint that a loader of the directory could read
# instead of, or with, the converted ones, besides its configuration
# (`CONFIG_FILE_NAMES`): weights by their endings (the readers' formats,
# Keras', Flax's, GGUF), TensorFlow's shards (`.data-00000-of-00001`) and its
# `checkpoint` state file. Files of this model (a tokenizer's, LoRA adapters'
# `.npz`, an ONNX export) are not among them.
WEIGHTS_FILE_ENDINGS = (
    ".safetensors", ".bin", ".pt", ".pth", ".h5", ".keras", ".ckpt", ".index", ".index.json",
    ".msgpack", ".gguf",
)


def _other_checkpoint_files(output):
    """The names of another checkpoint's files in the directory `output`
    (sorted): a configuration this command did not write, and weights files
    other than the `model.weights.h5` beside one it wrote."""
    from keras_attn.models.config_files import CONFIG_FILE_NAMES

    if not os.path.isdir(output):
        return []
    names = os.listdir(output)
    ours = "config.json" in names and _written_by_this_command(os.path.join(output, "config.json"))
    found = []
    for name in sorted(names):
        if ours and name in ("config.json", "model.weights.h5"):
            continue
        if (
            name in CONFIG_FILE_NAMES or name == "checkpoint" or ".data-" in name
            or name.endswith(WEIGHTS_FILE_ENDINGS)
        ):
            found.append(name)
    return found


def _written_by_this_command(config_path):
    """Whether `config_path` holds the builder's fields and nothing else, as
    this command writes them (`TransformerConfig`'s; a Hugging Face or Google
    configuration has others: `model_type`, `architectures`,
    `hidden_dropout_prob`, ...)."""
    from keras_attn.models.transformer_config import FIELDS

    try:
        with open(config_path, encoding="utf-8") as file:
            values = json.load(file)
    except (OSError, ValueError):
        return False
    return isinstance(values, dict) and bool(values) and set(values) <= FIELDS


def _check_output(source, config, output, format):
    """Raises a ValueError, before anything is read or written, where
    writing `output` could overwrite a file the run reads: the source's
    directory (or one containing it) or the `--config` file's."""
    read_directories = {os.path.realpath(_source_directory(source))}
    read_files = set()
    if os.path.isdir(config):
        read_directories.add(os.path.realpath(config))
    else:
        read_files.add(os.path.realpath(config))
    target = os.path.realpath(output)
    if format == "keras":
        if target in read_files:
            raise ValueError(
                f"OUTPUT {output!r} is the configuration file this run reads; "
                "choose another OUTPUT file."
            )
        return
    for directory in sorted(read_directories | {os.path.dirname(f) for f in read_files}):
        if directory == target or directory.startswith(os.path.join(target, "")):
            where = "is" if directory == target else "contains"
            raise ValueError(
                f"OUTPUT {output!r} {where} the directory {directory!r} this run reads "
                f"(SOURCE {source!r}, its configuration {config!r}): writing "
                "OUTPUT/config.json and OUTPUT/model.weights.h5 could overwrite the "
                "files being converted and verified. Choose a new OUTPUT directory, "
                "e.g. one beside SOURCE."
            )


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


def _verification_inputs(model, config, batch=2, length=16):
    """A batch within the model's contract, and the real tokens of each ids
    input (name -> boolean `(batch, its length)`): each input group its own
    length (16, 11, ...), random ids, the second row ending in padding where
    the model reads padding, other inputs (`segment_ids`) zeros.
    """
    contract = model.input_contract
    pad = config.pad_token_id
    generator = np.random.default_rng(0)
    groups = {}
    for name in contract.limits:
        groups.setdefault(contract.groups.get(name), []).append(name)
    inputs, real = {}, {}
    for index, names in enumerate(groups.values()):
        size = length - 5 * index
        if contract.max_length is not None:
            size = min(size, contract.max_length)
        ids_name = next(name for name in names if name.endswith("token_ids"))
        mask_name = ids_name.replace("token_ids", "padding_mask")
        vocabulary = contract.limits[ids_name]
        decoder = ids_name == "decoder_token_ids"
        reads_pad_id = pad is not None and not decoder
        token_ids = generator.integers(0, vocabulary, (batch, size)).astype("int32")
        if reads_pad_id:
            token_ids[token_ids == pad] = (pad + 1) % vocabulary
        if decoder and config.decoder_start_token_id is not None:
            token_ids[:, 0] = config.decoder_start_token_id
        valid = np.ones((batch, size), bool)
        if reads_pad_id or mask_name in contract.limits:
            valid[1:, size // 2 :] = False
        if reads_pad_id:
            token_ids = np.where(valid, token_ids, pad).astype("int32")
        real[ids_name] = valid
        for name in names:
            if name == ids_name:
                inputs[name] = token_ids
            elif name == mask_name:
                inputs[name] = valid.astype("int32")
            else:
                inputs[name] = np.zeros((batch, size), "int32")
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


def _reference_output(reader, source, model, inputs, real, log):
    """`(name, field, output)`: the `transformers` model's output on `inputs`
    for a Hugging Face source (the `references` of the model's checkpoint
    family), or None (another format, an application without a reference,
    or `transformers`/`torch` not installed)."""
    from keras_attn.checkpoints import families

    family = families.get(model.template.checkpoint_family)
    if reader.format == "tensorflow" or model.application not in family.references:
        return None
    try:
        import torch
        import transformers
    except ImportError:
        log("transformers/torch not installed: no comparison with the source framework.")
        return None
    class_name, field = family.references[model.application]
    directory = source if os.path.isdir(source) else os.path.dirname(source)
    transformers.logging.set_verbosity_error()
    transformers.logging.disable_progress_bar()
    overrides = family.reference_overrides.get(model.application)
    if overrides:
        model_type = transformers.AutoConfig.from_pretrained(directory).model_type
        class_name = overrides.get(model_type, class_name)
    log(f"Comparing with transformers.{class_name} loaded from {directory}")
    reference = getattr(transformers, class_name).from_pretrained(directory).eval()
    feed = {}
    for name, value in inputs.items():
        if name not in REFERENCE_INPUT_NAMES:
            continue  # a padding mask: given below, as its ids' attention mask
        ids_keyword, mask_keyword = REFERENCE_INPUT_NAMES[name]
        feed[ids_keyword] = torch.tensor(value, dtype=torch.long)
        if mask_keyword is not None:
            feed[mask_keyword] = torch.tensor(real[name], dtype=torch.long)
    with torch.no_grad():
        output = getattr(reference(**feed), field).numpy()
    return f"transformers.{class_name}", field, output




def __getattr__(name):
    if name == "ARCHITECTURE_APPLICATIONS":
        import warnings

        from keras_attn.checkpoints import families

        warnings.warn(
            "keras_attn.convert.ARCHITECTURE_APPLICATIONS is deprecated; each family "
            "declares its own (CheckpointFamily.architecture_applications), looked up "
            "by keras_attn.checkpoints.families.application_for_architecture.",
            DeprecationWarning,
            stacklevel=2,
        )
        return {
            architecture: application
            for family in families.FAMILIES.values()
            for architecture, application in family.architecture_applications.items()
        }
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


if __name__ == "__main__":
    sys.exit(main())
