"""Span extraction with GlobalPointer (bert4keras's gplinker, its entity part), offline.

Ported from the entity part of bert4keras's task_relation_extraction_gplinker.py
(bert4keras's examples have no GlobalPointer NER script of their own).

Finds the keywords, identifiers, numbers and strings of Python source lines
(your installation's standard library) as `(type, start, end)` spans of
characters: a small BERT from `keras_attn.build_transformer_model` (random
weights) and `keras_attn.layers.GlobalPointer` (or `--efficient`:
`EfficientGlobalPointer`), one head per type, trained with
`keras_attn.losses.SparseMultilabelCrossEntropy(span_labels=True)` on labels
padded by `keras_attn.sequence_padding`. A span is predicted where its logit
is above 0. Reports span F1 on held-out lines against a per-character
majority-tag baseline.

    KERAS_BACKEND=jax python examples/bert4keras/global_pointer_ner.py [--quick]
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(1, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from common import parse_example_arguments  # noqa: E402  (imports no Keras)
from python_spans import span_task_arguments  # noqa: E402  (imports no Keras)


def parse_arguments(argv=None):
    parser = span_task_arguments(__doc__, batch_size=16)
    parser.add_argument("--learning-rate", type=float, default=2e-3, help="peak learning rate")
    parser.add_argument("--efficient", action="store_true", help="EfficientGlobalPointer")
    parser.add_argument("--quick", action="store_true", help="800 short lines, 30 short epochs")
    return parse_example_arguments(parser, argv)


if __name__ == "__main__":
    ARGUMENTS = parse_arguments()  # before Keras is imported: --help is instant

import keras  # noqa: E402
import numpy as np  # noqa: E402

import keras_attn  # noqa: E402
from python_spans import (  # noqa: E402
    SMALL_BERT, TYPES, report, split_and_encode,
)


def span_labels(examples, max_entities):
    """`(lines, types, max_entities, 2)` `(start, end)` token positions
    (characters shifted by [CLS]), padded with `(0, 0)`."""
    per_line = []
    for _, spans in examples:
        by_type = [[(s + 1, e + 1) for t, s, e in spans if t == kind] for kind in range(len(TYPES))]
        per_line.append(keras_attn.sequence_padding(
            [np.zeros((0, 2), "int32") if not pairs else np.array(pairs, "int32") for pairs in by_type],
            length=max_entities,
        ))
    return keras_attn.sequence_padding(per_line, length=(len(TYPES), max_entities), seq_dims=2)


def main(arguments):
    if arguments.quick:
        arguments.lines, arguments.epochs, arguments.max_chars = 800, 30, 30
    keras.utils.set_random_seed(0)

    train, test, maxlen, vocabulary_size, train_inputs, test_inputs = split_and_encode(
        arguments.lines, arguments.max_chars
    )
    # A fixed entity count keeps one compiled shape for every batch.
    max_entities = max(len(spans) for _, spans in train + test)
    labels = span_labels(train, max_entities)
    print(f"backend={keras.config.backend()}: {len(train) + len(test)} source lines, {len(train)} for training")

    encoder = keras_attn.build_transformer_model(
        dict(SMALL_BERT, vocab_size=vocabulary_size, max_position_embeddings=maxlen)
    )
    pointer_cls = (
        keras_attn.layers.EfficientGlobalPointer if arguments.efficient else keras_attn.layers.GlobalPointer
    )
    # Spans lie within the characters: [CLS], [SEP] and padding are masked.
    characters = keras.ops.greater(encoder.inputs[0], 3)
    logits = pointer_cls(heads=len(TYPES), head_size=32, name="pointer")(encoder.output, mask=characters)
    model = encoder.with_outputs(logits, name="span_extractor")
    model.compile(
        optimizer=keras.optimizers.Adam(arguments.learning_rate),
        loss=keras_attn.losses.SparseMultilabelCrossEntropy(span_labels=True),
        jit_compile=keras.config.backend() != "torch",
    )
    history = model.fit(
        train_inputs, labels, batch_size=arguments.batch_size, epochs=arguments.epochs, verbose=2
    )

    scores_of_spans = model.predict(test_inputs, batch_size=arguments.batch_size, verbose=0)
    predicted = [
        [(int(t), int(s) - 1, int(e) - 1) for t, s, e in zip(*np.nonzero(row > 0))]
        for row in scores_of_spans
    ]
    meta = {"backend": keras.config.backend(), "quick": arguments.quick,
            "lines": len(train) + len(test), "epochs": arguments.epochs, "layer": pointer_cls.__name__}
    report("global_pointer_ner", predicted, train, test, history, meta, directory=arguments.output)


if __name__ == "__main__":
    main(ARGUMENTS)
