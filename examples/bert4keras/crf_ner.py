"""Sequence labelling with a CRF (bert4keras's task_sequence_labeling_ner_crf), offline.

Tags the keywords, identifiers, numbers and strings of Python source lines
(your installation's standard library), character by character, with BIO
labels: a small BERT from `keras_attn.build_transformer_model` (random
weights), a Dense layer of emission scores and
`keras_attn.layers.ConditionalRandomField`, trained with its negative
log-likelihood and decoded by Viterbi inside a compiled `predict`. Reports
span F1 on held-out lines against a per-character majority-tag baseline.

    KERAS_BACKEND=jax python examples/bert4keras/crf_ner.py [--quick]
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(1, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from common import parse_example_arguments  # noqa: E402  (imports no Keras)
from python_spans import span_task_arguments  # noqa: E402  (imports no Keras)


def parse_arguments(argv=None):
    parser = span_task_arguments(__doc__, batch_size=32)
    parser.add_argument("--quick", action="store_true", help="800 short lines, 8 epochs")
    return parse_example_arguments(parser, argv)


if __name__ == "__main__":
    ARGUMENTS = parse_arguments()  # before Keras is imported: --help is instant

import keras  # noqa: E402
import numpy as np  # noqa: E402

import keras_attn  # noqa: E402
from python_spans import (  # noqa: E402
    SMALL_BERT, TYPES, bio_spans, bio_tags, report, split_and_encode,
)


def main(arguments):
    if arguments.quick:
        arguments.lines, arguments.epochs, arguments.max_chars = 800, 8, 30
    keras.utils.set_random_seed(0)

    train, test, maxlen, vocabulary_size, train_inputs, test_inputs = split_and_encode(
        arguments.lines, arguments.max_chars
    )
    labels = np.zeros((len(train), maxlen), "int32")
    for row, (line, spans) in enumerate(train):
        labels[row, 1 : len(line) + 1] = bio_tags(line, spans)
    print(f"backend={keras.config.backend()}: {len(train) + len(test)} source lines, {len(train)} for training")

    encoder = keras_attn.build_transformer_model(
        dict(SMALL_BERT, vocab_size=vocabulary_size, max_position_embeddings=maxlen)
    )
    emissions = keras.layers.Dense(1 + 2 * len(TYPES), name="emissions")(encoder.output)
    crf = keras_attn.layers.ConditionalRandomField(lr_multiplier=100, name="crf")
    # [CLS], [SEP] and padding are not tagged.
    characters = keras.ops.greater(encoder.inputs[0], 3)
    model = encoder.with_outputs(crf(emissions, mask=characters), name="tagger")
    jit = keras.config.backend() != "torch"
    model.compile(
        optimizer=keras.optimizers.Adam(2e-3), loss=crf.loss, metrics=[crf.accuracy],
        jit_compile=jit,
    )
    history = model.fit(
        train_inputs, labels, batch_size=arguments.batch_size, epochs=arguments.epochs, verbose=2
    )

    decoder = encoder.with_outputs(crf.decode(model.output), name="decoder")
    decoder.compile(jit_compile=jit)
    paths = decoder.predict(test_inputs, batch_size=arguments.batch_size, verbose=0)
    predicted = [bio_spans(path[1 : len(line) + 1]) for path, (line, _) in zip(paths, test)]
    meta = {"backend": keras.config.backend(), "quick": arguments.quick,
            "lines": len(train) + len(test), "epochs": arguments.epochs}
    report("crf_ner", predicted, train, test, history, meta, directory=arguments.output)


if __name__ == "__main__":
    main(ARGUMENTS)
