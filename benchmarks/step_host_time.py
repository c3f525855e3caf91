"""The host's time per graphed torch decoding step, measured without a GPU.

On a GPU a compiled decoding step replays as one CUDA graph
(`keras_attn.torch_runtime.step_graph.StepGraph`), so what a step costs the
host is everything around the replay: the loop, the step's bookkeeping
(flattening its arguments, copying them into the graph's buffers, copying
its outputs), the sampler's arguments. While that stays below the GPU's
time per step the GPU never waits. This measures it on any machine: the
graph is emulated on the CPU with a replay that does nothing (the tokens
are then meaningless; the host's work is the same), and the decoding loop
(`decoding_loop.run_steps`, the prompt's encoding left out) is timed.

GPT-2 small's depth at width 48 (12 layers, 12 heads of 4, vocabulary
4096, one random `transformers.GPT2LMHeadModel` loaded by keras_attn),
greedy, batch 8, prompts of 32, 256 new tokens, one CPU thread; the median
over `--repeats` `generate` calls after two warm-up calls (the first
compiles the step).

    KERAS_BACKEND=torch python benchmarks/step_host_time.py

Results go to `benchmarks/results/step_host_time_torch.json` (or
`--output`). Not part of the test suite.
"""

import argparse
import os
import tempfile
import time

import keras
import numpy as np

from bert_base import write_result

SHAPE = dict(vocab_size=4096, n_positions=1024, n_embd=48, n_layer=12, n_head=12)
BATCH, PROMPT, NEW_TOKENS = 8, 32, 256


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=9)
    parser.add_argument("--output", default=None)
    arguments = parser.parse_args()
    if keras.config.backend() != "torch":
        raise SystemExit("step_host_time.py measures the torch backend: set KERAS_BACKEND=torch.")
    os.environ["KERAS_ATTN_TORCH_COMPILE"] = "1"
    os.environ["KERAS_ATTN_TORCH_CUDA_GRAPHS"] = "1"
    import torch
    import transformers

    import keras_attn
    from keras_attn.torch_runtime import step_graph
    from keras_attn.samplers import decoding_loop

    torch.set_num_threads(1)

    class HostOnlyGraph(step_graph.StepGraph):
        """`StepGraph` on CPU tensors, its capture a plain run and its
        replay nothing: every other part of a graphed step is its own."""

        @staticmethod
        def on_device(tensor):
            return isinstance(tensor, torch.Tensor)

        def warm_up(self, run):
            return run()

        def capture(self, run):
            return run()

        def replay(self):
            pass

    step_graph.StepGraph = HostOnlyGraph
    step_graph.on_gpu = lambda tokens: True
    loop_seconds = []
    run_steps = decoding_loop.run_steps

    def timed_steps(*args, **kwargs):
        started = time.perf_counter()
        result = run_steps(*args, **kwargs)
        loop_seconds.append(time.perf_counter() - started)
        return result

    decoding_loop.run_steps = timed_steps
    with tempfile.TemporaryDirectory() as directory:
        transformers.GPT2LMHeadModel(transformers.GPT2Config(**SHAPE)).save_pretrained(directory)
        model = keras_attn.build_transformer_model(directory, application="lm")
    prompts = np.random.default_rng(0).integers(5, SHAPE["vocab_size"], (BATCH, PROMPT))
    for _ in range(2):
        model.generate(prompts.astype("int32"), NEW_TOKENS)
    del loop_seconds[:]
    calls = []
    for _ in range(arguments.repeats):
        started = time.perf_counter()
        model.generate(prompts.astype("int32"), NEW_TOKENS)
        calls.append(time.perf_counter() - started)
    steps = NEW_TOKENS
    per_step = float(np.median(loop_seconds)) / steps * 1e6
    call = float(np.median(calls)) * 1e3
    print(f"host time per graphed step: {per_step:.0f} µs; per generate call: {call:.1f} ms")
    write_result(
        {
            "shape": SHAPE, "batch": BATCH, "prompt": PROMPT, "new_tokens": NEW_TOKENS,
            "threads": 1, "repeats": arguments.repeats,
            "host_microseconds_per_step": per_step, "milliseconds_per_generate_call": call,
            "load_average_1_minute": os.getloadavg()[0],
        },
        arguments.output, "step_host_time_torch.json",
    )


if __name__ == "__main__":
    main()
