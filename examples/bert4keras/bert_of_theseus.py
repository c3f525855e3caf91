"""BERT-of-Theseus: compress a trained classifier's encoder into half its
depth by progressive module replacing, offline.

bert4keras's `task_iflytek_bert_of_theseus.py`, ported. Xu et al. 2020
("BERT-of-Theseus: Compressing BERT by Progressive Module Replacing",
https://arxiv.org/abs/2002.02925): a trained predecessor is frozen; a
successor with fewer blocks, initialised from the predecessor's embeddings
and first blocks, is trained inside it, each successor module (the
embeddings, then each block) replacing its group of predecessor blocks with
probability `--replacement-rate` at every step; at inference the successor
runs alone. The two encoders live in one Keras graph because they are built
with distinct `prefix=`es (`Predecessor-`, `Successor-`); each template's
`apply_embeddings`, `block_arguments` and `apply_main_layer` run its layers
on the shared inputs, and `keras_attn.layers.BinaryRandomChoice` picks one
module's output.

The task is examples/finetune_classifier.py's: tell which standard-library
package a docstring line comes from, with a WordPiece vocabulary learned
from the training lines and randomly initialised encoders (no pretrained
checkpoint is downloaded). The script reports the held-out accuracy of the
predecessor, of the successor alone after Theseus training, and of a
successor with the same initialisation trained directly on the labels for
as many epochs, and writes `bert_of_theseus.json`. Whichever wins is
reported as it comes.

    KERAS_BACKEND=jax python examples/bert4keras/bert_of_theseus.py
    python examples/bert4keras/bert_of_theseus.py --quick
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
    parser.add_argument("--hidden-size", type=int, default=128, help="hidden width of both models")
    parser.add_argument(
        "--predecessor-layers", type=int, default=6,
        help="layers of the model to compress",
    )
    parser.add_argument(
        "--successor-layers", type=int, default=3,
        help="layers of the compressed model",
    )
    parser.add_argument(
        "--replacement-rate", type=float, default=0.5,
        help="probability of running a successor module in place of its predecessor modules",
    )
    parser.add_argument(
        "--predecessor-epochs", type=int, default=8,
        help="epochs training the predecessor",
    )
    parser.add_argument("--epochs", type=int, default=4, help="of Theseus and of the direct successor")
    parser.add_argument(
        "--maxlen", type=int, default=48,
        help="tokens per line, padded or truncated",
    )
    parser.add_argument("--batch-size", type=int, default=32, help="examples per training step")
    parser.add_argument("--quick", action="store_true", help="a few hundred lines, smaller models")
    return parse_example_arguments(parser, argv)


if __name__ == "__main__":
    ARGUMENTS = parse_arguments()  # before Keras is imported: --help is instant

import keras  # noqa: E402
import numpy as np  # noqa: E402

import keras_attn  # noqa: E402
from common import encode_texts, labelled_lines, train_vocabulary, write_results  # noqa: E402


def classifier(encoder, head):
    """`encoder` with `head` on its first token, checking its inputs."""
    return encoder.with_outputs(head(encoder.output[:, 0]))


def compile_for(model, steps, learning_rate):
    model.compile(
        optimizer=keras.optimizers.AdamW(
            keras.optimizers.schedules.CosineDecay(
                0.0, steps, warmup_target=learning_rate, warmup_steps=max(1, steps // 10)
            )
        ),
        loss="sparse_categorical_crossentropy",
        metrics=["accuracy"],
        jit_compile=keras.config.backend() != "torch",
    )
    return model


def initialise_from(successor, predecessor):
    """The successor's weights from the predecessor's of the same names
    (the embeddings and the first blocks), as the paper initialises it: the
    names match once each model's `prefix` is removed."""
    source = {
        weight.path.removeprefix(predecessor.template.prefix): weight
        for weight in predecessor.weights
    }
    for weight in successor.weights:
        # A copy: on JAX a compiled step donates (frees) its variables' buffers,
        # which must not be the predecessor's.
        value = keras.ops.convert_to_numpy(source[weight.path.removeprefix(successor.template.prefix)])
        weight.assign(np.array(value))


def bert_of_theseus(predecessor, successor, head, replacement_rate):
    """The Theseus model: the predecessor's inputs, each successor module
    standing in for its group of predecessor modules while training (see
    `BinaryRandomChoice`), the frozen head on the first token. The
    predecessor and the head are frozen here, after the predecessor's
    training and before this model's `compile`: Keras 3 reads `trainable`
    when a model's first `fit` builds its step, so a freeze before the
    predecessor's `fit` would have frozen it there too, and one after the
    next model's first `fit` is ignored on TensorFlow and an error on JAX."""
    for layer in predecessor.layers:
        layer.trainable = False
    head.trainable = False
    old, new = predecessor.template, successor.template
    inputs = predecessor.named_inputs
    old_hidden, new_hidden = old.apply_embeddings(inputs), new.apply_embeddings(inputs)
    old_arguments = old.block_arguments(inputs, old_hidden)
    new_arguments = new.block_arguments(inputs, new_hidden)
    choose = keras_attn.layers.BinaryRandomChoice
    hidden = choose(replacement_rate, name="Theseus-Embeddings")(old_hidden, new_hidden)
    per_module = old.config.num_layers // new.config.num_layers
    for index in range(new.config.num_layers):
        old_hidden = hidden
        for offset in range(per_module):
            old_hidden = old.apply_main_layer(old_hidden, per_module * index + offset, *old_arguments)
        new_hidden = new.apply_main_layer(hidden, index, *new_arguments)
        hidden = choose(replacement_rate, name=f"Theseus-{index}")(old_hidden, new_hidden)
    return predecessor.with_outputs(head(hidden[:, 0]), name="theseus")


def main(arguments):
    if arguments.quick:
        arguments.hidden_size, arguments.predecessor_layers, arguments.successor_layers = 64, 2, 1
        arguments.epochs, arguments.maxlen = 4, 32
    if arguments.predecessor_layers % arguments.successor_layers:
        raise SystemExit("--predecessor-layers must be a multiple of --successor-layers")
    keras.utils.set_random_seed(0)

    texts, labels = labelled_lines(arguments.packages, per_class=200 if arguments.quick else None)
    labels = np.asarray(labels)
    split = int(0.8 * len(texts))
    print(
        f"backend={keras.config.backend()}: {len(texts)} docstring lines from "
        f"{arguments.packages}, {split} for training"
    )
    vocab = train_vocabulary(texts[:split], tempfile.mkdtemp(), size=1000 if arguments.quick else 3000)
    tokenizer = keras_attn.Tokenizer(vocab, do_lower_case=True)
    inputs = encode_texts(tokenizer, texts, arguments.maxlen, fixed_width=True)
    train = {key: value[:split] for key, value in inputs.items()}
    test = {key: value[split:] for key, value in inputs.items()}
    majority = max(np.mean(labels[split:] == c) for c in range(len(arguments.packages)))
    config = dict(
        vocab_size=sum(1 for _ in open(vocab, encoding="utf-8")),
        hidden_size=arguments.hidden_size,
        num_hidden_layers=arguments.predecessor_layers,
        num_attention_heads=4,
        intermediate_size=2 * arguments.hidden_size,
        max_position_embeddings=arguments.maxlen,
        type_vocab_size=2,
    )
    steps = arguments.epochs * -(-split // arguments.batch_size)
    fit = dict(batch_size=arguments.batch_size, epochs=arguments.epochs, verbose=2)
    classes = len(arguments.packages)

    def accuracy(model):
        return float(model.evaluate(test, labels[split:], verbose=0)[1])

    # 1. The predecessor, trained on the task.
    predecessor = keras_attn.build_transformer_model(config, prefix="Predecessor-")
    head = keras.layers.Dense(classes, activation="softmax", name="Classifier")
    predecessor_steps = arguments.predecessor_epochs * -(-split // arguments.batch_size)
    predecessor_model = compile_for(classifier(predecessor, head), predecessor_steps, 1e-3)
    predecessor_model.fit(train, labels[:split], **dict(fit, epochs=arguments.predecessor_epochs))
    results = {"predecessor": {"held_out_accuracy": accuracy(predecessor_model),
                               "layers": arguments.predecessor_layers}}

    # 2. A directly trained successor: same start, its own head, the labels.
    direct = keras_attn.build_transformer_model(
        config, prefix="Direct-", num_hidden_layers=arguments.successor_layers
    )
    initialise_from(direct, predecessor)
    direct_head = keras.layers.Dense(classes, activation="softmax", name="Direct-Classifier")
    direct_head.build((None, arguments.hidden_size))
    direct_head.set_weights(head.get_weights())
    direct_model = compile_for(classifier(direct, direct_head), steps, 1e-3)
    direct_model.fit(train, labels[:split], **fit)

    # 3. The successor, trained inside the frozen predecessor, then alone.
    successor = keras_attn.build_transformer_model(
        config, prefix="Successor-", num_hidden_layers=arguments.successor_layers
    )
    initialise_from(successor, predecessor)
    successor_at_start = accuracy(compile_for(classifier(successor, head), steps, 1e-3))
    theseus = compile_for(
        bert_of_theseus(predecessor, successor, head, arguments.replacement_rate), steps, 1e-3
    )
    theseus.fit(train, labels[:split], **fit)
    successor_model = compile_for(classifier(successor, head), steps, 1e-3)
    blocks = len(successor.template.blocks)
    results["successor_after_theseus"] = {
        "held_out_accuracy": accuracy(successor_model),
        "held_out_accuracy_before_theseus": successor_at_start,
        "layers": blocks,
        "encoder_parameters": int(successor.count_params()),
    }
    results["successor_trained_directly"] = {
        "held_out_accuracy": accuracy(direct_model), "layers": arguments.successor_layers,
    }
    results["predecessor"]["encoder_parameters"] = int(predecessor.count_params())
    results["majority_class"] = float(majority)
    for name in ("predecessor", "successor_after_theseus", "successor_trained_directly"):
        print(f"{name}: {results[name]['layers']} blocks, held-out accuracy "
              f"{results[name]['held_out_accuracy']:.3f} (majority class {majority:.3f})")
    results["_meta"] = {
        "backend": keras.config.backend(), "quick": arguments.quick,
        "packages": arguments.packages, "hidden_size": arguments.hidden_size,
        "replacement_rate": arguments.replacement_rate, "epochs": arguments.epochs,
        "predecessor_epochs": arguments.predecessor_epochs,
    }
    write_results("bert_of_theseus", results, directory=arguments.output)


if __name__ == "__main__":
    main(ARGUMENTS)
