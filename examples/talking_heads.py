"""Talking-heads attention with many small heads.

Shazeer et al. (2020), "Talking-Heads Attention": mixing the heads' scores
before the softmax lets many tiny heads act as one of higher rank. Same task
as key_size_bottleneck.py (a rank-32 selection pattern over 32 positions),
with 16 heads of key_size = head_size = 2 at hidden size 32: plain multi-head
attention against talking-heads attention.

    KERAS_BACKEND=jax python examples/talking_heads.py [--quick]

Writes examples/results/talking_heads.{json,png}.
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

    compare_on_selection_task(
        "talking_heads",
        {
            "multi-head, 16 heads of size 2": lambda: keras_attn.MultiHeadAttention(
                heads=16, head_size=2, out_dim=16
            ),
            "talking-heads, 16 heads of size 2": lambda: keras_attn.TalkingHeadsAttention(
                heads=16, head_size=2, out_dim=16
            ),
        },
        quick=arguments.quick,
        output=arguments.output,
    )


if __name__ == "__main__":
    main()
