"""keras_attn's command line (`keras-attn-convert`), importable without Keras.

`import keras_attn` imports Keras, which fails where Keras' backend is not
installed (a JAX-only install without `KERAS_BACKEND`: Keras' default is
TensorFlow), and any module of the package runs `keras_attn/__init__.py`
first. The console script therefore starts here, outside the package: the
arguments are parsed before keras_attn is imported, so `--help` and argument
errors work with or without a backend, and an `import keras_attn` that fails
is reported in one line (its message says which backend to choose or
install), without a traceback.

What the help lists of the library (its checkpoint families, variants and
applications) is written here for that reason; the converter's tests check
that it equals the library's registries.
"""

import argparse
import sys

# The checkpoint families the converter reads, as `keras_attn.checkpoints.
# families` declares them (their `title`s, in declaration order).
CHECKPOINT_FAMILIES = (
    "BERT", "RoBERTa", "ALBERT", "ELECTRA", "RoFormer", "NEZHA", "GAU-alpha", "GPT",
    "GPT-2", "GPT2-ML", "T5", "LLaMA", "Mistral", "Qwen2", "Qwen3", "Gemma", "Gemma 2",
    "Gemma 3", "Phi-3", "ModernBERT", "DeBERTa-v2",
)

# The builder's built-in variants (`keras_attn.models.registry.VARIANTS`, in
# registration order).
VARIANTS = (
    "bert", "roberta", "roberta+", "talking_heads", "tta", "sinusoidal", "roformer",
    "roformer_v2", "nezha", "gau_alpha", "alibi", "kerple_log", "kerple_power", "sandwich",
    "xpos", "albert", "albert_unshared", "electra", "gpt", "gpt2", "gpt2_ml", "t5",
    "t5.1.1", "mt5.1.1", "t5_encoder", "llama", "mistral", "qwen2", "qwen3", "gemma",
    "gemma2", "gemma3", "phi3", "modernbert", "deberta_v2",
)

# Every application a variant may build (`keras_attn.models.transformer.
# APPLICATIONS`): the `--application` choices.
APPLICATIONS = ("encoder", "mlm", "lm", "unilm", "discriminator", "seq2seq")


def convert(argv=None):
    """`keras-attn-convert` on `argv` (default `sys.argv[1:]`): parses the
    arguments, imports keras_attn and runs `keras_attn.convert.run`; returns
    the exit status (see `keras_attn.convert`), 1 where keras_attn cannot be
    imported. `--help` and bad arguments exit (0 and 2) before any import."""
    arguments = convert_parser().parse_args(argv)
    try:
        import keras_attn  # noqa: F401  (imports Keras and its backend)
    except ImportError as error:
        print(f"keras-attn-convert: error: {one_line(error)}", file=sys.stderr)
        return 1
    from keras_attn.convert import run

    return run(arguments)


def convert_parser():
    """The `argparse` parser of `keras-attn-convert`."""
    parser = argparse.ArgumentParser(
        prog="keras-attn-convert",
        description=(
            "Convert a checkpoint into keras_attn's OUTPUT/config.json + "
            "OUTPUT/model.weights.h5 (or one .keras file), and verify it. Checkpoint "
            f"families: {_listed(CHECKPOINT_FAMILIES)}; as Hugging Face folders or files "
            "(.safetensors, .bin) or Google TensorFlow checkpoints."
        ),
        epilog=(
            "Exit status: 0 converted (and verified), 1 an error, 2 bad arguments, "
            "3 a verification that failed."
        ),
    )
    parser.add_argument("source", help="checkpoint: HF directory or file, TF checkpoint prefix or directory")
    parser.add_argument("output", help="output directory (--format weights) or .keras file")
    parser.add_argument("--config", help="configuration file (default: the one beside SOURCE)")
    parser.add_argument(
        "--variant",
        help=f"builder variant (default: the config's family's); built in: {', '.join(VARIANTS)}",
    )
    parser.add_argument(
        "--application", default=None, choices=APPLICATIONS,
        help="builder application (default: the one holding the head of the saved "
        "Hugging Face class, e.g. discriminator for ElectraForPreTraining; else the "
        "variant's first: encoder for the BERT family, lm for GPT-2, seq2seq for T5)",
    )
    parser.add_argument(
        "--format", default="weights", choices=["weights", "keras"],
        help="weights: OUTPUT/config.json + OUTPUT/model.weights.h5; keras: one .keras file",
    )
    parser.add_argument(
        "--overwrite", action="store_true",
        help="convert into an OUTPUT directory that holds another checkpoint's files "
        "(a config.json this command did not write, other weight files), replacing them; "
        "without it such a directory is refused. A directory this command wrote before "
        "is replaced without it.",
    )
    parser.add_argument("--no-verify", dest="verify_off", action="store_true",
                        help="skip the comparison of the written model with its source")
    parser.add_argument("--quiet", action="store_true", help="no progress on stderr")
    return parser


def one_line(error):
    """`error`'s message on one line."""
    return " ".join(line.strip() for line in str(error).splitlines() if line.strip())


def _listed(names):
    return f"{', '.join(names[:-1])} or {names[-1]}"


if __name__ == "__main__":
    sys.exit(convert())
