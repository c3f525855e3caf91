"""Two facts about self-attention, checked numerically.

1. Multi-head attention costs what single-head attention costs. With n
   tokens, hidden size d and h heads of size d/h, the projections cost
   3 * 2nd^2 either way, the scores h * 2n^2(d/h) = 2n^2 d, and the weighted
   sum the same: the matrix products are exactly equal; only multi-head's
   output projection (2nd^2) and the h-times larger softmax differ. Counted
   analytically and, on JAX, by XLA's own cost analysis of the compiled layer.
2. Without positions, self-attention is permutation-equivariant: permuting
   the tokens permutes the outputs and changes nothing else. Adding position
   encodings breaks it.

    KERAS_BACKEND=jax python examples/attention_basics.py [--quick]

Writes attention_basics.{json,png} to `./keras_attn_results/` (`--output DIR`
elsewhere; `--update-results` replaces the committed ones in
`examples/results/`).
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from common import example_arguments, parse_example_arguments  # noqa: E402  (imports no Keras)


def parse_arguments(argv=None):
    parser = example_arguments(__doc__)
    parser.add_argument(
        "--quick", action="store_true",
        help="smaller shapes (64 tokens, width 64) for a fast check",
    )
    return parse_example_arguments(parser, argv)


if __name__ == "__main__":
    ARGUMENTS = parse_arguments()  # before Keras is imported: --help is instant

import keras  # noqa: E402
import numpy as np  # noqa: E402

import keras_attn  # noqa: E402
from common import write_results  # noqa: E402


def analytic_flops(n, d, heads, output_projection):
    """Multiply-add FLOPs (2 per multiply-add) of the matrix products."""
    size = d // heads
    projections = 3 * 2 * n * d * d
    scores = heads * 2 * n * n * size
    weighted_sum = heads * 2 * n * n * size
    output = 2 * n * d * d if output_projection else 0
    return projections + scores + weighted_sum + output


def measured_flops(n, d, heads):
    """XLA's cost analysis of the compiled layer (JAX only), or None."""
    if keras.config.backend() != "jax":
        return None
    import jax

    layer = keras_attn.MultiHeadAttention(heads, d // heads, use_bias=False, fused_attention=False)
    x = np.random.default_rng(0).normal(size=(1, n, d)).astype("float32")
    layer(x)
    variables = [v.value for v in layer.trainable_variables]

    def forward(variables, x):
        return layer.stateless_call(variables, [], x)[0]

    cost = jax.jit(forward).lower(variables, x).compile().cost_analysis()
    cost = cost[0] if isinstance(cost, list) else cost
    return float(cost["flops"])


def permutation_check(n, d):
    rng = np.random.default_rng(1)
    x = rng.normal(size=(1, n, d)).astype("float32")
    permutation = rng.permutation(n)
    layer = keras_attn.MultiHeadAttention(4, d // 4)
    plain = keras.ops.convert_to_numpy(layer(x))
    permuted = keras.ops.convert_to_numpy(layer(x[:, permutation]))
    positions = keras.ops.convert_to_numpy(
        keras_attn.layers.SinusoidalPositionEmbedding(d)(x)
    )
    with_positions = keras.ops.convert_to_numpy(layer(x + positions))
    permuted_with_positions = keras.ops.convert_to_numpy(layer(x[:, permutation] + positions))
    return {
        "without_positions_max_difference": float(np.abs(permuted - plain[:, permutation]).max()),
        "with_sinusoidal_positions_max_difference": float(
            np.abs(permuted_with_positions - with_positions[:, permutation]).max()
        ),
    }


def main(arguments):
    keras.utils.set_random_seed(0)
    n, d = (64, 64) if arguments.quick else (256, 512)

    rows = []
    print(f"n={n} tokens, d={d}")
    print("heads  analytic (no W_o)  analytic (with W_o)  XLA cost analysis (layer, with W_o)")
    for heads in (1, 2, 4, 8, 16):
        row = {
            "heads": heads,
            "analytic_without_output_projection": analytic_flops(n, d, heads, False),
            "analytic_with_output_projection": analytic_flops(n, d, heads, True),
            "xla_cost_analysis": measured_flops(n, d, heads),
        }
        rows.append(row)
        measured = row["xla_cost_analysis"]
        print(
            f"{heads:>5}  {row['analytic_without_output_projection']:>17,}  "
            f"{row['analytic_with_output_projection']:>19,}  "
            f"{'n/a (JAX only)' if measured is None else f'{measured:,.0f}'}"
        )
    single_head = analytic_flops(n, d, 1, False)
    multi_head = analytic_flops(n, d, 8, True)
    print(
        f"single head without W_o vs 8 heads with W_o: {multi_head / single_head:.3f}x "
        "(the difference is the output projection)"
    )
    permutation = permutation_check(n, d)
    print(
        "permutation: max |f(Px) - P f(x)| = "
        f"{permutation['without_positions_max_difference']:.1e} without positions, "
        f"{permutation['with_sinusoidal_positions_max_difference']:.1e} with sinusoidal positions"
    )
    heads = [row["heads"] for row in rows]
    curves = {
        "analytic, without output projection": (heads, [r["analytic_without_output_projection"] / 1e6 for r in rows]),
        "analytic, with output projection": (heads, [r["analytic_with_output_projection"] / 1e6 for r in rows]),
    }
    if rows[0]["xla_cost_analysis"] is not None:
        curves["XLA cost analysis of the layer"] = (heads, [r["xla_cost_analysis"] / 1e6 for r in rows])
    write_results(
        "attention_basics",
        {"n": n, "d": d, "flops": rows, "permutation": permutation,
         "_meta": {"backend": keras.config.backend(), "quick": arguments.quick}},
        curves, xlabel="heads (same hidden size d)", ylabel="MFLOPs per sequence", logx=True,
        directory=arguments.output,
    )


if __name__ == "__main__":
    main(ARGUMENTS)
