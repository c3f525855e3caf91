"""The low-rank bottleneck of multi-head attention, and the key_size fix.

Bhojanapalli et al. (2020), "Low-Rank Bottleneck in Multi-head Attention
Models": with `head_size = hidden / heads`, each head's score matrix has rank
at most `head_size`, so a small head cannot express an attention pattern of
higher rank. The task (`common.selection_task`): `y_i` is the mean of the
contents at a fixed random set of 8 of the n = 32 positions; its attention
matrix has rank up to 32. Hidden size 32 and 8 heads (head_size 4) are fixed;
only `key_size` changes: 4 (= head_size), 16 (4x) and 32 (= n).

    KERAS_BACKEND=jax python examples/key_size_bottleneck.py [--quick]

Writes examples/results/key_size_bottleneck.{json,png}.
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import keras_attn  # noqa: E402
from common import compare_on_selection_task  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small data, 4 epochs")
    parser.add_argument("--output", default=None, help="results directory")
    arguments = parser.parse_args()

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


if __name__ == "__main__":
    main()
