"""`keras-attn-convert`: a checkpoint the builder reads, written as this
library's own files and verified against its source.

    keras-attn-convert SOURCE OUTPUT [--config FILE] [--variant NAME]
        [--application NAME] [--format {weights,keras}] [--no-verify] [--quiet]

`SOURCE` is anything `build_transformer_model` reads as a checkpoint: a
Hugging Face directory (or its `.safetensors`/`.bin` file) of a BERT,
RoBERTa, ALBERT, GPT-2, T5 or mT5, a Google TensorFlow checkpoint prefix
(`.../bert_model.ckpt`) or a directory holding one. The configuration is
`--config`, else the `config.json` or `bert_config.json` beside the
checkpoint. `--variant` and `--application` default to the config's
variant and that variant's first application (`"encoder"` for the BERT
family, `"lm"` for GPT-2, `"seq2seq"` for T5; `"lm"` for a decoder's
config, `is_decoder: true`, as BertLMHeadModel saves), except for the
Hugging Face classes whose head another application holds
(`ARCHITECTURE_APPLICATIONS`: an `ElectraForPreTraining` folder converts
as `"discriminator"`, an `ElectraForMaskedLM` one as `"mlm"`). Checkpoint
weights of heads the converted model does not have (a BERT's masked-LM
head under `"encoder"`) are listed in the summary line.

`--format weights` (the default) writes the directory `OUTPUT` with
`config.json` (the builder's fields) and `model.weights.h5`; reload with
`build_transformer_model("OUTPUT/config.json", "OUTPUT/model.weights.h5",
variant=..., application=...)`. `--format keras` writes the single file
`OUTPUT` (ending in `.keras`); reload with `keras.saving.load_model` after
`import keras_attn` (Keras finds only registered classes, and importing
keras_attn registers its own). The command ends by printing these lines
for the files it wrote. Writing is atomic: the files are written whole
under temporary names beside OUTPUT and then renamed into place, so a run
that fails while writing (a full disk, an interrupt) leaves a previous
OUTPUT as it was and no partial file. Nothing the run reads is written over: an OUTPUT
directory that is or contains SOURCE's directory (or the `--config`
file's) is refused before anything is read (exit status 1); a new
directory beside SOURCE or inside it is fine.

Verification (unless `--no-verify`): the written files are reloaded into a
fresh model, which must reproduce the model built from `SOURCE` exactly (to
1e-6) on a small batch of each of its inputs (see `_verification_inputs`:
padded where the model reads padding; for an encoder-decoder a source and a
target of different lengths). For a Hugging Face source, with
`transformers` installed, the reloaded model's output must also equal
the `transformers` model's on the real (unpadded) positions to 1e-4 or 1e-5 of
its largest |output|, whichever is larger (float32 rounding grows with the
logits' size), for the applications its checkpoint family's declaration
lists (`references`, see `keras_attn.checkpoints.families`):

| family                 | application | compared with                               |
|------------------------|-------------|---------------------------------------------|
| BERT, RoBERTa, ALBERT  | encoder     | `AutoModel`'s `last_hidden_state`           |
| GPT-2                  | lm          | `AutoModelForCausalLM`'s `logits`           |
| GPT-2                  | encoder     | `AutoModel`'s `last_hidden_state`           |
| T5, mT5                | seq2seq     | `AutoModelForSeq2SeqLM`'s `logits`          |
| T5, mT5 (`t5_encoder`) | encoder     | `T5EncoderModel`'s `last_hidden_state`      |
| ELECTRA                | encoder     | `AutoModel`'s `last_hidden_state`           |
| ELECTRA                | discriminator | `ElectraForPreTraining`'s `logits`        |
| LLaMA, Mistral, Qwen2, Qwen3 | lm    | `AutoModelForCausalLM`'s `logits`           |
| LLaMA, Mistral, Qwen2, Qwen3 | encoder | `AutoModel`'s `last_hidden_state`         |

The last line says which of these ran.

Progress goes to stderr: a line per step (building the model, writing,
reloading, loading the reference) and one per checkpoint array read.

Exit status: 0 converted (and verified where asked), 1 an error (a missing
file, a checkpoint that does not fit: the message names the file and the
variables), 3 a verification that failed, 2 bad arguments.
"""

import argparse
import dataclasses
import json
import os
import shutil
import sys
import tempfile
import time

import numpy as np

# Tolerances of the two verifications: the same arithmetic (written and
# reloaded weights), and another framework's, which is relative to the
# outputs' scale: `max(REFERENCE_TOLERANCE, REFERENCE_RELATIVE_TOLERANCE *
# max|reference output|)` (float32 rounding grows with the size of the
# logits: mT5's reach 27, where TensorFlow and torch differ by 1e-4).
ROUND_TRIP_TOLERANCE = 1e-6
REFERENCE_TOLERANCE = 1e-4
REFERENCE_RELATIVE_TOLERANCE = 1e-5

# `--application` choices: every application a variant may build.
APPLICATION_CHOICES = ("encoder", "mlm", "lm", "unilm", "discriminator", "seq2seq")

# Hugging Face classes (a config's `architectures`) whose head only an
# application other than the variant's first holds: without
# `--application`, such a checkpoint is converted with its head.
ARCHITECTURE_APPLICATIONS = {
    "ElectraForPreTraining": "discriminator",
    "ElectraForMaskedLM": "mlm",
    "ModernBertForMaskedLM": "mlm",
}

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
    config_source = config or _source_directory(source)
    _check_output(source, config_source, output, format)
    started = time.perf_counter()
    reader = open_checkpoint(source)
    parsed = load_config(config_source)
    if application is None:
        application = _saved_application(config_source, parsed, variant)
    log(f"Building the model from the configuration in {config_source}")
    model = build_transformer_model(dataclasses.asdict(parsed), variant=variant, application=application)
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
    if format == "keras":
        _write_keras_file(model, output)
        written = output
    else:
        _write_weights_directory(model, parsed, output)
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
    `ARCHITECTURE_APPLICATIONS`), when the variant builds it; else None (the
    builder's default)."""
    from keras_attn.models.builder import select_variant
    from keras_attn.models.registry import VARIANTS
    from keras_attn.models.transformer_config import find_config_file

    path = find_config_file(config_source) if os.path.isdir(config_source) else config_source
    if path is None or not os.path.isfile(path):
        return None
    with open(path, encoding="utf-8") as file:
        architectures = json.load(file).get("architectures") or []
    applications = VARIANTS[select_variant(config, variant)].applications
    for architecture in architectures:
        application = ARCHITECTURE_APPLICATIONS.get(architecture)
        if application in applications:
            return application
    return None


def _write_keras_file(model, output):
    """Saves `model` to the `.keras` file `output` atomically: written whole
    beside it under a temporary name, then renamed over it, so a failure
    mid-write leaves any previous `output` as it was."""
    parent = os.path.dirname(os.path.abspath(output))
    os.makedirs(parent, exist_ok=True)
    descriptor, staging = tempfile.mkstemp(
        prefix=".keras-attn-convert-", suffix=".keras", dir=parent
    )
    os.close(descriptor)
    try:
        _permit_as_umask(staging, 0o666)
        model.save(staging)
        os.replace(staging, output)
    finally:
        if os.path.exists(staging):
            os.remove(staging)


def _write_weights_directory(model, config, output):
    """Writes `output/config.json` and `output/model.weights.h5`
    atomically: both are written whole into a temporary directory beside
    `output`, which then becomes `output` (when new) or whose two files are
    renamed over the previous ones (the weights first). A failure while
    writing leaves any previous `output` as it was, and no partial file."""
    parent = os.path.dirname(os.path.abspath(output))
    os.makedirs(parent, exist_ok=True)
    staging = tempfile.mkdtemp(prefix=".keras-attn-convert-", dir=parent)
    try:
        _permit_as_umask(staging, 0o777)
        with open(os.path.join(staging, "config.json"), "w", encoding="utf-8") as file:
            json.dump(dataclasses.asdict(config), file, indent=2)
        model.save_weights(os.path.join(staging, "model.weights.h5"))
        if not os.path.exists(output):
            os.rename(staging, output)
            return
        for name in ("model.weights.h5", "config.json"):
            os.replace(os.path.join(staging, name), os.path.join(output, name))
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _permit_as_umask(path, mode):
    """Gives `path` the permissions a plain `open`/`mkdir` would have given
    it (`tempfile` makes files and directories private to their owner)."""
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(path, mode & ~umask)


def _source_directory(source):
    """The directory a run reads `source` from: the checkpoint's files, the
    configuration beside them, and what `transformers` loads for the
    reference comparison."""
    return source if os.path.isdir(source) else os.path.dirname(source) or "."


def _check_output(source, config, output, format):
    """Raises a ValueError, before anything is read or written, where
    writing `output` could overwrite a file the run reads.

    The run reads every file of the source's directory (`open_checkpoint`
    picks the checkpoint there, `load_config` its `config.json`,
    `transformers` both) and the `--config` file (or a `--config`
    directory's files). `--format weights` writes `OUTPUT/config.json` and
    `OUTPUT/model.weights.h5`: OUTPUT may be a new directory beside the
    source or inside it, but not the source's directory, nor a directory
    that contains it, nor the directory of the `--config` file.
    `--format keras` writes the one file OUTPUT, which must not be the
    `--config` file."""
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


def _parser():
    parser = argparse.ArgumentParser(
        prog="keras-attn-convert",
        description=(
            "Convert a Google TF or Hugging Face BERT-family, GPT-2 or T5 checkpoint into a "
            "keras_attn .weights.h5 + config.json (or a .keras file), and verify it."
        ),
    )
    parser.add_argument("source", help="checkpoint: HF directory or file, TF checkpoint prefix or directory")
    parser.add_argument("output", help="output directory (--format weights) or .keras file")
    parser.add_argument("--config", help="configuration file (default: the one beside SOURCE)")
    parser.add_argument("--variant", help="builder variant (default: the config's family)")
    parser.add_argument(
        "--application", default=None, choices=APPLICATION_CHOICES,
        help="builder application (default: the one holding the head of the saved "
        "Hugging Face class, e.g. discriminator for ElectraForPreTraining; else the "
        "variant's first: encoder for the BERT family, lm for GPT-2, seq2seq for T5)",
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


def _verification_inputs(model, config, batch=2, length=16):
    """A batch within the model's contract, and the real tokens of each ids
    input: a dict of ids input name -> boolean `(batch, its length)`.

    Each group of inputs (`InputContract.groups`: an encoder-decoder's
    source and target) has a length of its own, 16, 11, ..., so that a
    model that mixed them up fails. Ids are random in the vocabulary; the
    second row ends in padding where the model reads padding: from its
    `padding_mask` input if it takes one, else from the pad id (never where
    `pad_token_id` is None, as in GPT-2, and never in a decoder's ids, which
    start with the decoder start token, the pad id in T5). Other inputs
    (`segment_ids`) are zeros.
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


def _one_line(error):
    return " ".join(line.strip() for line in str(error).splitlines() if line.strip())


if __name__ == "__main__":
    sys.exit(main())
