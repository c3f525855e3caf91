"""Where a torch pass spends its time: Python and dispatch on the host, or
kernels on the device.

On the torch backend this profiles (`torch.profiler`), with random weights
on the device Keras computes on:

- one BERT-base inference call at batch 8 x 128 (`--shape`; `model(inputs)`
  without gradients, inputs already on the device) of keras_attn
  (`--jit-compile`: its blocks compiled; CUDA graphs off, so that each
  kernel shows) and of transformers' `BertModel` (eager, SDPA), in the
  dtype of `--dtype`;
- `--decode-tokens` greedy steps of a GPT-2 small `lm` at batch 8 (prompts
  of 32 tokens; the step compiled first, `KERAS_ATTN_TORCH_COMPILE=1`).

For each it prints the wall time per call, the device's busy time (the sum
of its kernels' times), the number of kernel launches and the host
operators with the most time of their own, then the kernels with the most
device time. A pass whose wall time is far above its device time is bound
by the host, the gap issue 30 measured; one whose device time is above
transformers' computes more or slower kernels, which the second table
names.
Writes the tables to `--output` (default `torch_profile.txt`).

    KERAS_BACKEND=torch python benchmarks/torch_profile.py

Not part of the test suite.
"""

import argparse
import os
import tempfile
import time

os.environ.setdefault("KERAS_ATTN_TORCH_COMPILE", "1")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402

import keras_attn  # noqa: E402
import placement  # noqa: E402
from bert_base import CONFIG  # noqa: E402
from bert_base import torch_eager_calls  # noqa: E402


def profiled(name, function, calls, lines):
    """Runs `function` twice to warm up, then `calls` times under the
    profiler; appends a summary and the top host operators to `lines`."""
    device = placement.torch_device()
    for _ in range(2):
        function()
    placement.synchronize(device)
    activities = [torch.profiler.ProfilerActivity.CPU]
    if device.type == "cuda":
        activities.append(torch.profiler.ProfilerActivity.CUDA)
    start = time.perf_counter()
    with torch.profiler.profile(activities=activities) as profile:
        for _ in range(calls):
            function()
        placement.synchronize(device)
    wall = (time.perf_counter() - start) / calls
    events = profile.key_averages()
    device_us = sum(getattr(e, "self_device_time_total", 0) for e in events) / calls
    launches = sum(e.count for e in events if "LaunchKernel" in e.key) / calls
    lines.append(
        f"== {name}: {wall * 1e3:.2f} ms per call under the profiler, device busy "
        f"{device_us / 1e3:.2f} ms, {launches:.0f} kernel launches per call"
    )
    lines.append(events.table(sort_by="self_cpu_time_total", row_limit=15))
    if device.type == "cuda":
        lines.append(events.table(sort_by="self_device_time_total", row_limit=15))


def bert(lines, calls, jit_compile, shape=(8, 128)):
    tokens = np.random.default_rng(0).integers(1000, 30000, size=shape).astype("int32")
    ours, theirs = torch_eager_calls(CONFIG, tokens, jit_compile)
    how = ", jit_compile=True" if jit_compile else ""
    dtype = keras.config.dtype_policy().name
    size = "x".join(map(str, shape))
    # The eager pass's kernels one by one, not one replayed graph.
    graphs = os.environ.get("KERAS_ATTN_TORCH_CUDA_GRAPHS")
    os.environ["KERAS_ATTN_TORCH_CUDA_GRAPHS"] = "0"
    try:
        profiled(f"keras_attn BERT-base {size} ({dtype}{how})", ours, calls, lines)
    finally:
        if graphs is None:
            del os.environ["KERAS_ATTN_TORCH_CUDA_GRAPHS"]
        else:
            os.environ["KERAS_ATTN_TORCH_CUDA_GRAPHS"] = graphs
    profiled(f"transformers BERT-base {size} ({dtype})", theirs, calls, lines)


def gpt2_decode(lines, new_tokens):
    import transformers

    from generation import GPT2_SMALL

    with tempfile.TemporaryDirectory() as directory:
        transformers.GPT2LMHeadModel(transformers.GPT2Config(**GPT2_SMALL)).save_pretrained(directory)
        model = keras_attn.build_transformer_model(directory)
    prompts = np.random.default_rng(0).integers(1, 50000, size=(8, 32)).astype("int32")
    profiled(
        f"keras_attn GPT-2 small generate ({keras.config.dtype_policy().name}), batch 8, "
        f"{new_tokens} new tokens",
        lambda: model.generate(prompts, new_tokens), 1, lines,
    )


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=5)
    parser.add_argument("--decode-tokens", type=int, default=32)
    parser.add_argument("--output", default="torch_profile.txt")
    parser.add_argument(
        "--jit-compile", action="store_true",
        help="profile keras_attn's BERT compiled (`compile(jit_compile=True)`: its blocks)",
    )
    parser.add_argument(
        "--shape", default="8x128", help="BERT's batch x length, e.g. 32x512",
    )
    parser.add_argument(
        "--dtype", default="float32", choices=["float32", "bfloat16"],
        help="Keras' global dtype policy; transformers' BERT is cast to it",
    )
    arguments = parser.parse_args()
    if keras.config.backend() != "torch":
        raise SystemExit("torch_profile.py profiles the torch backend: set KERAS_BACKEND=torch.")
    keras.config.set_dtype_policy(arguments.dtype)
    lines = [f"device: {placement.device_name()}, torch {torch.__version__}"]
    shape = tuple(int(part) for part in arguments.shape.split("x"))
    bert(lines, arguments.calls, arguments.jit_compile, shape)
    if arguments.decode_tokens:
        gpt2_decode(lines, arguments.decode_tokens)
    text = "\n".join(lines)
    print(text)
    with open(arguments.output, "w") as file:
        file.write(text + "\n")


if __name__ == "__main__":
    main()
