"""The host's share of a torch pass: BERT-base's depth at almost no width.

A 12-layer BERT of width 48 (12 heads of 4, FFN 192) at batch 1 x 8 does
next to no arithmetic, so the time of one eager call (`model(inputs)`,
without gradients, one CPU thread) is the Python and dispatch a pass costs
whatever the width: what a GPU waits for while BERT-base's small batches
run (issue 30). keras_attn's builder model and transformers' `BertModel`
(eager) of the same shape, side by side, medians of `--repeats` calls after
warm-up calls.

    KERAS_BACKEND=torch python benchmarks/host_overhead.py

Results go to `benchmarks/results/host_overhead_torch.json` (or
`--output`). Not part of the test suite.
"""

import argparse
import os

import keras
import numpy as np

from bert_base import timed_side_by_side
from bert_base import torch_eager_calls
from bert_base import write_result

CONFIG = dict(
    vocab_size=1000, hidden_size=48, num_hidden_layers=12, num_attention_heads=12,
    intermediate_size=192, max_position_embeddings=512, type_vocab_size=2,
)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=150)
    parser.add_argument("--output", default=None)
    arguments = parser.parse_args()
    if keras.config.backend() != "torch":
        raise SystemExit("host_overhead.py measures the torch backend: set KERAS_BACKEND=torch.")
    import torch

    torch.set_num_threads(1)
    tokens = np.random.default_rng(0).integers(1, 999, size=(1, 8)).astype("int32")
    ours, theirs = torch_eager_calls(CONFIG, tokens)
    for _ in range(3):  # warm-up calls beyond timed_side_by_side's one
        ours(), theirs()
    timings = timed_side_by_side(
        {"keras_attn": ours, "transformers (eager)": theirs}, arguments.repeats
    )
    rows = [
        {"model": name, "milliseconds": seconds * 1e3}
        for name, (_, seconds) in timings.items()
    ]
    ratio = timings["transformers (eager)"][1] / timings["keras_attn"][1]
    for row in rows:
        print(f"{row['model']:<22} {row['milliseconds']:6.2f} ms")
    print(f"keras_attn: {ratio:.2f}x transformers (eager)")
    write_result(
        {
            "config": CONFIG, "batch": 1, "length": 8, "threads": 1,
            "repeats": arguments.repeats, "rows": rows, "speed_vs_transformers": ratio,
            "load_average_1_minute": os.getloadavg()[0],
        },
        arguments.output, "host_overhead_torch.json",
    )


if __name__ == "__main__":
    main()
