"""keras_attn's command line (`keras-attn serve`, `keras-attn-convert`),
importable without Keras.

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
    "bert", "roberta", "albert", "albert_unshared", "electra", "roformer", "roformer_v2",
    "nezha", "gau_alpha", "gpt", "gpt2", "gpt2_ml", "t5", "t5.1.1", "mt5.1.1", "t5_encoder",
    "llama", "mistral", "qwen2", "qwen3", "gemma", "gemma2", "gemma3", "phi3", "modernbert",
    "deberta_v2", "roberta+", "talking_heads", "tta", "sinusoidal", "alibi", "kerple_log",
    "kerple_power", "sandwich", "xpos",
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


def main(argv=None):
    """`keras-attn` on `argv` (default `sys.argv[1:]`): its subcommand
    `serve MODEL_DIR` serves a Hugging Face checkpoint folder over HTTP
    (`keras_attn.serving.server.serve`) until interrupted. Returns the exit
    status: 0 after a clean stop, 1 where keras_attn, the `[serve]` extra or
    the folder cannot be loaded; `--help` and bad arguments exit (0 and 2)
    before any import."""
    arguments = main_parser().parse_args(argv)
    try:
        import jinja2  # noqa: F401
        import starlette  # noqa: F401
        import uvicorn  # noqa: F401
    except ImportError as error:
        print(f"keras-attn serve: error: {one_line(error)}; the server needs the [serve] "
              'extra: pip install "keras_attn[serve]"', file=sys.stderr)
        return 1
    try:
        import keras_attn  # noqa: F401  (imports Keras and its backend)
    except ImportError as error:
        print(f"keras-attn serve: error: {one_line(error)}", file=sys.stderr)
        return 1
    from keras_attn.serving.server import serve

    try:
        serve(arguments.model_dir, host=arguments.host, port=arguments.port,
              max_batch=arguments.max_batch, max_length=arguments.max_length,
              block_size=arguments.block_size, num_blocks=arguments.num_blocks,
              prefill_chunk=arguments.prefill_chunk, max_waiting=arguments.max_waiting,
              shutdown_timeout=arguments.shutdown_timeout, warm_up=arguments.warm_up)
    except (OSError, ValueError) as error:
        print(f"keras-attn serve: error: {one_line(error)}", file=sys.stderr)
        return 1
    return 0


def main_parser():
    """The `argparse` parser of `keras-attn`."""
    parser = argparse.ArgumentParser(prog="keras-attn", description="keras_attn's commands.")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    serve = commands.add_parser(
        "serve", help="serve a checkpoint folder with an OpenAI-compatible HTTP API",
        description=(
            "Serve a Hugging Face checkpoint folder (config.json, weights, tokenizer.json; "
            "a chat_template in tokenizer_config.json for /v1/chat/completions) as an "
            "application='lm' model with continuous batching: POST /v1/completions, POST "
            "/v1/chat/completions, GET /v1/models, GET /health. Needs the [serve] extra."
        ),
    )
    serve.add_argument("model_dir", metavar="MODEL_DIR", help="Hugging Face checkpoint folder")
    serve.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    serve.add_argument("--port", type=int, default=8000, help="port (default 8000)")
    serve.add_argument("--max-batch", type=int, default=8, help="rows decoded together (default 8)")
    serve.add_argument("--max-length", type=int, default=None,
                       help="longest request, prompt plus new tokens (default: the model's)")
    serve.add_argument("--block-size", type=int, default=16,
                       help="positions per key/value cache block (default 16)")
    serve.add_argument("--num-blocks", type=int, default=None,
                       help="cache blocks per layer (default: room for --max-batch requests "
                       "of --max-length)")
    serve.add_argument("--prefill-chunk", type=int, default=None,
                       help="prompt tokens encoded per step (default: 4 per row of "
                       "--max-batch, at least 32)")
    serve.add_argument("--max-waiting", type=int, default=256,
                       help="requests waiting for the engine before new ones get 429 (default 256)")
    serve.add_argument("--shutdown-timeout", type=float, default=30.0,
                       help="seconds requests in flight get to finish at shutdown (default 30)")
    serve.add_argument("--no-warm-up", dest="warm_up", action="store_false",
                       help="start serving without building every program first (the first "
                       "requests then wait for them; by default the server warms up before it "
                       "listens: Engine.warm_up)")
    return parser


def one_line(error):
    """`error`'s message on one line."""
    return " ".join(line.strip() for line in str(error).splitlines() if line.strip())


def _listed(names):
    return f"{', '.join(names[:-1])} or {names[-1]}"


if __name__ == "__main__":
    sys.exit(convert())
