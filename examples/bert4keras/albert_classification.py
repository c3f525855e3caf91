"""ALBERT vs BERT of the same size on a text classification task, offline.

bert4keras's `model="albert"`, ported: `build_transformer_model(config,
variant="albert")` (or an ALBERT `albert_config.json` / Hugging Face
`config.json`, which selects the variant by itself). The task is
examples/finetune_classifier.py's: tell which standard-library package a
docstring line comes from. Both models start from random weights, with the
same SentencePiece tokenizer trained on the training lines, and have the
same width and depth; ALBERT factorises its embeddings and shares one block
across its layers, so it has a fraction of BERT's parameters. The script
reports each model's parameter count and held-out accuracy and writes
`albert_classification.json`.

    KERAS_BACKEND=jax python examples/bert4keras/albert_classification.py
    python examples/bert4keras/albert_classification.py --quick
"""

import os
import sys
import tempfile

EXAMPLES = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, EXAMPLES)

from common import example_arguments, parse_example_arguments  # noqa: E402  (imports no Keras)


def parse_arguments(argv=None):
    parser = example_arguments(__doc__)
    parser.add_argument(
        "--packages", nargs="+", default=["email", "asyncio"],
        help="standard-library packages whose docstring lines are the classes",
    )
    parser.add_argument("--hidden-size", type=int, default=128, help="hidden width of the models")
    parser.add_argument(
        "--embedding-size", type=int, default=32,
        help="ALBERT's factorized embedding width",
    )
    parser.add_argument("--layers", type=int, default=4, help="transformer layers")
    parser.add_argument("--epochs", type=int, default=4, help="training epochs")
    parser.add_argument(
        "--maxlen", type=int, default=48,
        help="tokens per line, padded or truncated",
    )
    parser.add_argument("--batch-size", type=int, default=32, help="examples per training step")
    parser.add_argument("--quick", action="store_true", help="a few hundred lines, one epoch, smaller models")
    return parse_example_arguments(parser, argv)


if __name__ == "__main__":
    ARGUMENTS = parse_arguments()  # before Keras is imported: --help is instant

import keras  # noqa: E402
import numpy as np  # noqa: E402

import keras_attn  # noqa: E402
from common import labelled_lines, write_results  # noqa: E402
from common import encode_texts  # noqa: E402
from finetune_classifier import build_classifier  # noqa: E402


def train_sentencepiece(texts, directory, size):
    """An ALBERT-style SentencePiece model (`<pad>` 0, `<unk>` 1, `[CLS]`,
    `[SEP]`, `[MASK]`) learned from lowercased `texts`."""
    import sentencepiece

    prefix = os.path.join(directory, "spm")
    sentencepiece.SentencePieceTrainer.train(
        sentence_iterator=iter(texts), model_prefix=prefix, vocab_size=size,
        pad_id=0, unk_id=1, bos_id=-1, eos_id=-1,
        user_defined_symbols=["[CLS]", "[SEP]", "[MASK]"], minloglevel=2,
    )
    return prefix + ".model"


def main(arguments):
    if arguments.quick:
        arguments.hidden_size, arguments.embedding_size, arguments.layers = 64, 16, 2
        arguments.epochs, arguments.maxlen = 1, 32

    texts, labels = labelled_lines(arguments.packages, per_class=120 if arguments.quick else None)
    # SpTokenizer leaves text as given: lowercase it, as AlbertTokenizer does.
    texts = [text.lower() for text in texts]
    labels = np.asarray(labels)
    split = int(0.8 * len(texts))
    print(
        f"backend={keras.config.backend()}: {len(texts)} docstring lines from "
        f"{arguments.packages}, {split} for training"
    )
    model_file = train_sentencepiece(
        texts[:split], tempfile.mkdtemp(), size=500 if arguments.quick else 2000
    )
    tokenizer = keras_attn.SpTokenizer(model_file)
    inputs = encode_texts(tokenizer, texts, arguments.maxlen, fixed_width=True)
    train = {key: value[:split] for key, value in inputs.items()}
    test = {key: value[split:] for key, value in inputs.items()}
    majority = max(np.mean(labels[split:] == c) for c in range(len(arguments.packages)))

    config = dict(
        vocab_size=tokenizer.vocab_size,
        hidden_size=arguments.hidden_size,
        num_hidden_layers=arguments.layers,
        num_attention_heads=4,
        intermediate_size=2 * arguments.hidden_size,
        max_position_embeddings=arguments.maxlen,
        type_vocab_size=2,
    )
    configs = {
        "albert": dict(config, model_type="albert", embedding_size=arguments.embedding_size),
        "bert": dict(config, model_type="bert"),
    }
    results = {}
    steps = arguments.epochs * -(-split // arguments.batch_size)
    for name, model_config in configs.items():
        keras.utils.set_random_seed(0)
        encoder = keras_attn.build_transformer_model(model_config)
        model = build_classifier(encoder, len(arguments.packages))
        model.compile(
            optimizer=keras.optimizers.AdamW(
                keras.optimizers.schedules.CosineDecay(
                    0.0, steps, warmup_target=1e-3, warmup_steps=steps // 10
                )
            ),
            loss="sparse_categorical_crossentropy",
            metrics=["accuracy"],
            jit_compile=keras.config.backend() != "torch",
        )
        model.fit(train, labels[:split], batch_size=arguments.batch_size,
                  epochs=arguments.epochs, verbose=2)
        _, accuracy = model.evaluate(test, labels[split:], verbose=0)
        results[name] = {
            "held_out_accuracy": float(accuracy),
            "encoder_parameters": int(encoder.count_params()),
        }
        print(f"{name}: {encoder.count_params():,} encoder parameters, "
              f"held-out accuracy {accuracy:.3f} (majority class {majority:.3f})")

    results["majority_class"] = float(majority)
    results["_meta"] = {
        "backend": keras.config.backend(), "quick": arguments.quick,
        "packages": arguments.packages, "hidden_size": arguments.hidden_size,
        "embedding_size": arguments.embedding_size, "layers": arguments.layers,
    }
    write_results("albert_classification", results, directory=arguments.output)


if __name__ == "__main__":
    main(ARGUMENTS)
