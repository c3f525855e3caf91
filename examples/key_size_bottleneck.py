"""The low-rank bottleneck of multi-head attention, and the key_size fix.

Bhojanapalli et al. (2020), "Low-Rank Bottleneck in Multi-head Attention
Models": with `head_size = hidden / heads`, each head's score matrix has rank
at most `head_size`, so a small head cannot express an attention pattern of
higher rank. The task (`common.selection_task`): `y_i` is the mean of the
contents at a fixed random set of 8 of the n = 32 positions; its attention
matrix has rank up to 32. Hidden size 32 and 8 heads (head_size 4) are fixed;
only `key_size` changes: 4 (= head_size), 16 (4x) and 32 (= n).

Then a character-level masked LM on the standard library's source at roughly
matched parameter count: 2 layers, hidden 64, 8 heads of size 8, with
key_size 8, 16 or 32 and the feed-forward width shrunk to pay for the wider
queries and keys.

    KERAS_BACKEND=jax python examples/key_size_bottleneck.py [--quick]

Writes key_size_bottleneck.{json,png} and
key_size_character_mlm.json to `./keras_attn_results/` (`--output DIR`
elsewhere; `--update-results` replaces the committed ones in
`examples/results/`).
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from common import example_arguments, parse_example_arguments  # noqa: E402  (imports no Keras)


def parse_arguments(argv=None):
    parser = example_arguments(__doc__)
    parser.add_argument("--quick", action="store_true", help="small data, 4 epochs")
    return parse_example_arguments(parser, argv)


if __name__ == "__main__":
    ARGUMENTS = parse_arguments()  # before Keras is imported: --help is instant

import keras  # noqa: E402
import numpy as np  # noqa: E402

import keras_attn  # noqa: E402
from common import (  # noqa: E402
    Timer,
    compare_on_selection_task,
    source_characters,
    windows,
    write_results,
)

# key_size -> feed-forward width giving about the same parameter count.
MLM_SIZES = {8: 256, 16: 192, 32: 62}


def character_mlm(key_size, intermediate_size, rows, vocabulary_size, epochs, rate=0.15):
    """Trains a small masked LM and returns (parameters, held-out masked loss)."""
    keras.utils.set_random_seed(0)
    config = dict(
        vocab_size=vocabulary_size, hidden_size=64, num_hidden_layers=2, num_attention_heads=8,
        intermediate_size=intermediate_size, attention_key_size=key_size,
        max_position_embeddings=rows.shape[1], type_vocab_size=0,
        hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
    )
    model = keras_attn.build_transformer_model(config, application="mlm")
    rng = np.random.default_rng(0)
    chosen = rng.random(rows.shape) < rate
    inputs = np.where(chosen, 1, rows).astype("int32")  # id 1 is [MASK]
    targets = np.where(chosen, rows, 0).astype("int32")
    split = len(rows) - 256
    model.compile(
        optimizer=keras.optimizers.Adam(2e-3),
        loss=keras_attn.TokenCrossEntropy(ignore_id=0),
        jit_compile=keras.config.backend() != "torch",
    )
    model.fit({"token_ids": inputs[:split]}, targets[:split], batch_size=32, epochs=epochs, verbose=0)
    loss = model.evaluate({"token_ids": inputs[split:]}, targets[split:], verbose=0)
    return model.count_params(), float(loss)


def main(arguments):

    def attention(key_size):
        return lambda: keras_attn.MultiHeadAttention(
            heads=8, head_size=4, key_size=key_size, out_dim=16
        )

    compare_on_selection_task(
        "key_size_bottleneck",
        {
            "key_size=4 (= head_size)": attention(4),
            "key_size=16 (4 x head_size)": attention(16),
            "key_size=32 (= n)": attention(32),
        },
        quick=arguments.quick,
        output=arguments.output,
    )

    ids, vocabulary = source_characters()
    rows = windows(ids, 64, count=512 if arguments.quick else None)
    results = {}
    for key_size, intermediate_size in MLM_SIZES.items():
        with Timer() as timer:
            parameters, loss = character_mlm(
                key_size, intermediate_size, rows, len(vocabulary), 1 if arguments.quick else 6
            )
        results[f"key_size={key_size}"] = {
            "intermediate_size": intermediate_size,
            "parameters": parameters,
            "held_out_masked_loss": loss,
            "seconds": timer.seconds,
        }
        print(
            f"character MLM key_size={key_size:<3} feed-forward {intermediate_size:>3}  "
            f"parameters {parameters:>7,}  held-out masked loss {loss:.3f}  ({timer.seconds:.0f} s)"
        )
    results["_meta"] = {"backend": keras.config.backend(), "quick": arguments.quick}
    write_results("key_size_character_mlm", results, directory=arguments.output)


if __name__ == "__main__":
    main(ARGUMENTS)
