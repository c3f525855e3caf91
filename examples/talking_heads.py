"""Talking-heads attention with many small heads.

Shazeer et al. (2020), "Talking-Heads Attention": mixing the heads' scores
before the softmax lets many tiny heads act as one of higher rank. Same task
as key_size_bottleneck.py (a rank-32 selection pattern over 32 positions),
with 16 heads of key_size = head_size = 2 at hidden size 32: plain multi-head
attention against talking-heads attention.

    KERAS_BACKEND=jax python examples/talking_heads.py [--quick]

Writes talking_heads.{json,png} to `./keras_attn_results/` (`--output DIR`
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

import keras_attn  # noqa: E402
from common import compare_on_selection_task  # noqa: E402


def main(arguments):

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
    main(ARGUMENTS)
