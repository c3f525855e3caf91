"""keras_attn in one minute, offline, on any of the three Keras backends.

Trains a tiny character-level causal language model on the source of Python's
own `argparse` module twice, once with `key_size == head_size` and once with a
wider `key_size` (the low-rank-bottleneck fix), plus once with talking-heads
attention; then saves the last model as `.keras`, reloads it and checks that
the reloaded model predicts identically.

    KERAS_BACKEND=jax python examples/quickstart.py
"""

import argparse
import os
import tempfile
import argparse as argparse_module

import keras
import numpy as np

import keras_attn


def load_characters(length):
    """Characters of a standard-library module's source, read from disk."""
    with open(argparse_module.__file__, encoding="utf-8") as source:
        text = source.read()[:length]
    vocabulary = sorted(set(text))
    index = {character: i for i, character in enumerate(vocabulary)}
    return np.array([index[c] for c in text], "int32"), len(vocabulary)


def windows(ids, length):
    count = (len(ids) - 1) // length
    inputs = ids[: count * length].reshape(count, length)
    targets = ids[1 : count * length + 1].reshape(count, length)
    return inputs, targets


def build_model(vocabulary_size, length, attention):
    tokens = keras.Input((length,), dtype="int32", name="token_ids")
    hidden = keras.layers.Embedding(vocabulary_size, 64, name="token_embedding")(tokens)
    position_ids = keras.ops.zeros_like(tokens) + keras.ops.arange(length, dtype="int32")
    positions = keras.layers.Embedding(length, 64, name="position_embedding")(
        position_ids
    )
    hidden = hidden + positions
    attended = attention(hidden, use_causal_mask=True)
    hidden = keras.layers.LayerNormalization(name="attention_norm")(hidden + attended)
    logits = keras.layers.Dense(vocabulary_size, name="logits")(hidden)
    return keras.Model(tokens, logits)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--characters", type=int, default=120_000)
    arguments = parser.parse_args()
    keras.utils.set_random_seed(0)

    length = 64
    ids, vocabulary_size = load_characters(arguments.characters)
    inputs, targets = windows(ids, length)
    split = int(0.9 * len(inputs))
    print(
        f"backend={keras.config.backend()} keras={keras.__version__} "
        f"keras_attn={keras_attn.__version__}: {len(inputs)} windows of "
        f"{length} characters, vocabulary {vocabulary_size}"
    )

    attentions = {
        "key_size=8 (= head_size)": lambda: keras_attn.MultiHeadAttention(
            heads=8, head_size=8, name="attention"
        ),
        "key_size=32": lambda: keras_attn.MultiHeadAttention(
            heads=8, head_size=8, key_size=32, name="attention"
        ),
        "talking heads": lambda: keras_attn.TalkingHeadsAttention(
            heads=8, head_size=8, name="attention"
        ),
    }
    results = {}
    for label, make_attention in attentions.items():
        print(f"\n== {label}")
        model = build_model(vocabulary_size, length, make_attention())
        model.compile(
            optimizer=keras.optimizers.AdamW(3e-3),
            loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        )
        history = model.fit(
            inputs[:split],
            targets[:split],
            validation_data=(inputs[split:], targets[split:]),
            batch_size=32,
            epochs=arguments.epochs,
            verbose=2,
        )
        results[label] = (model.count_params(), history.history["val_loss"][-1])

    print("\nattention                 parameters  validation loss (nats/char)")
    for label, (parameters, loss) in results.items():
        print(f"{label:<25} {parameters:>10,}  {loss:.3f}")

    path = os.path.join(tempfile.mkdtemp(), "quickstart.keras")
    model.save(path)
    restored = keras.models.load_model(path)
    difference = np.abs(
        keras.ops.convert_to_numpy(model.predict(inputs[split:], verbose=0))
        - keras.ops.convert_to_numpy(restored.predict(inputs[split:], verbose=0))
    ).max()
    print(f"\nsaved {path}; reloaded model's max |difference| = {difference:.1e}")
    if difference > 1e-5:
        raise SystemExit("the reloaded model does not reproduce the saved one")


if __name__ == "__main__":
    main()
