"""Serving under Poisson arrivals: keras_attn's continuous-batching `Engine`
against static batching with `model.generate` and transformers' continuous
batching, side by side in one run.

On the backend KERAS_BACKEND selects, with random weights in float32, for
each of `--models`:

- llama: the LLaMA shape of about 100M parameters of
  `benchmarks/generation.py --parts llama` (12 layers, hidden 768, 12 query
  heads over 3 key/value heads, SwiGLU 2048, vocabulary 32000, tied head);
- gpt2: GPT-2 small's shape (12 layers, hidden 768, 12 heads, FFN 3072,
  vocabulary 50257).

One random transformers model is saved with `save_pretrained` and keras_attn
builds its model from that directory (`generation.random_transformers_model`),
so every contender runs the same weights.

The workload: `--requests` requests (fixed `--seed`), prompts of
`--prompt-lengths` tokens and outputs of `--output-lengths` tokens, each
length drawn uniformly, token ids uniform in [1000, vocabulary); arrival
times a Poisson process of `--rate` requests per second (exponential gaps).
Every contender decodes greedily with no end token, so each request gets
exactly its output length and the work is equal. The contenders, one after
the other on the same requests and arrival times:

(a) engine: `keras_attn.serving.Engine(max_batch=--max-batch)` (its
    `prefill_chunk` `--prefill-chunk`, by default the engine's) started in
    its thread; the driver submits each request at its arrival time, and a
    thread per request iterates its `Delta`s, stamping each token with the
    time its delta arrived.
(b) static: requests grouped in arrival order into batches of `--max-batch`;
    a batch starts once its last member has arrived and the previous batch
    has finished, and runs `model.generate(prompts, max_new_tokens=the
    batch's longest output)`. Its tokens are delivered only when the batch
    ends, so each request's first token (and every other) comes at the
    batch's end. The batches run one after the other without sleeping: each
    `generate` is timed and the schedule is computed from those times (the
    same as waiting in real time, since nothing else runs meanwhile).
(c) transformers CB (on every backend; torch on the GPU Keras computes on,
    else the CPU): the transformers model's
    `init_continuous_batching(...)` manager, at most `--max-batch` requests
    per batch, `add_request(record_timestamps=True)` at each arrival time;
    its tokens carry transformers' own timestamps. Before its thread
    starts, the main thread's OpenMP workers are handed back
    (`release_thread_pool`), as `Engine.start` does for the engine's:
    otherwise each of its steps on the CPU waits longer on them.

Each contender is warmed up before its timed run: the engine by
`Engine.warm_up` (every program: each decoding window and the prompt
chunk; its seconds are recorded) and `--max-batch` short requests; static
batching by generating every batch of the workload once (on JAX and
TensorFlow each batch shape compiles); transformers by two short requests.
On torch the engine's programs are compiled by `torch.compile` in its
warm-up (`--engine-torch-compile auto`, the library's default; `0` runs
them eagerly), and static batching's decoding step is compiled for every
batch's shape in its warm-up by default (`--static-torch-compile 1`), so
that both are measured compiled; `0` runs it eagerly (every torch run
before 2026-11-29's last) and `auto` is the library's default rule for
`generate` (a shape compiles once its eager steps took what compiling
costs, which can happen inside the timed run).

Reported per contender: throughput (generated tokens over the whole run,
first arrival to last token), time to first token (TTFT, from arrival)
p50/p99, time between consecutive tokens of a request p50/p99 (every gap of
every request pooled; for static batching the delivered gaps are all zero,
so its row gives instead the batch's seconds per decoding step, `generate`
time over the batch's new tokens), end-to-end latency p50/p99 (arrival to
last token), and the ratios engine / static and engine / transformers
computed in this run. Greedy tokens are checked: the number of requests
whose engine tokens differ from static batching's (and from transformers'),
reported, not raised. The 1-minute load average before and after each
contender is recorded: other processes share the CPU.

With `--rates R1 R2 ...` the same requests (same prompts and lengths, the
arrival times scaled) are served at each rate in turn, and the result adds,
per model, throughput at equal p99 latency: for each p99 end-to-end latency
static batching reached in the sweep, the highest throughput the engine and
static batching reached at a rate that kept their p99 end-to-end latency
within it (`at_equal_latency`). With few requests the p99 is about the
slowest request's latency.

Results go to `benchmarks/results/serving_<backend>.json` (`--output-name`
to name it otherwise, `--output` for another folder).

    KERAS_BACKEND=jax python benchmarks/serving.py --small
    KERAS_BACKEND=torch python benchmarks/serving.py --models llama --requests 32 --rate 2
    KERAS_BACKEND=jax python benchmarks/serving.py --models llama --no-transformers \
        --requests 32 --prompt-lengths 8 32 --output-lengths 8 32 --rates 1 2 4 8 16

Not part of the test suite.
"""

import argparse
import itertools
import os
import tempfile
import threading
import time

import numpy as np

# generation.py forces torch compilation for its own timings; this benchmark
# keeps the library's default rule (or what the caller set).
_COMPILE_SETTING = os.environ.get("KERAS_ATTN_TORCH_COMPILE")
import generation  # noqa: E402

if _COMPILE_SETTING is None:
    os.environ.pop("KERAS_ATTN_TORCH_COMPILE", None)
else:
    os.environ["KERAS_ATTN_TORCH_COMPILE"] = _COMPILE_SETTING

import keras_attn  # noqa: E402
import placement  # noqa: E402
from bert_base import BACKEND  # noqa: E402
from bert_base import write_result  # noqa: E402
from keras_attn.serving import Engine  # noqa: E402
from keras_attn.serving import SamplingParams  # noqa: E402
from keras_attn.serving.engine import default_prefill_chunk  # noqa: E402
from keras_attn.torch_runtime.openmp import release_thread_pool  # noqa: E402

MODELS = {
    "llama": generation.PRETRAINED_SHAPES["llama"],
    "gpt2": generation.PRETRAINED_SHAPES["gpt2"],
}
BLOCK_SIZE = 16
ENGINE = "keras_attn Engine"
STATIC = "keras_attn static batching"
SMALL = {"requests": 12, "prompt_lengths": (8, 32), "output_lengths": (8, 32)}


def workload(count, rate, prompt_lengths, output_lengths, vocab_size, seed):
    """`count` requests: (arrival seconds, prompt ids, output length), the
    arrivals a Poisson process of `rate` per second starting at 0."""
    rng = np.random.default_rng(seed)
    gaps = rng.exponential(1.0 / rate, size=count)
    arrivals = np.cumsum(gaps) - gaps[0]
    requests = []
    for arrival in arrivals:
        prompt_length = int(rng.integers(prompt_lengths[0], prompt_lengths[1] + 1))
        output_length = int(rng.integers(output_lengths[0], output_lengths[1] + 1))
        prompt = rng.integers(1000, vocab_size, size=prompt_length).tolist()
        requests.append((float(arrival), prompt, output_length))
    return requests


def wait_until(moment):
    delay = moment - time.perf_counter()
    if delay > 0:
        time.sleep(delay)


def run_engine(model, requests, max_batch, max_length, prefill_chunk, torch_compile):
    """Contender (a): per request its tokens and their delivery times
    (perf_counter), the run's start and the seconds `warm_up` took. On torch
    the engine's programs follow `torch_compile` (`KERAS_ATTN_TORCH_COMPILE`'s
    values, read when the engine is made)."""
    saved = os.environ.get("KERAS_ATTN_TORCH_COMPILE")
    os.environ["KERAS_ATTN_TORCH_COMPILE"] = torch_compile
    try:
        engine = Engine(model, max_batch=max_batch, max_length=max_length,
                        block_size=BLOCK_SIZE, prefill_chunk=prefill_chunk, end_token_ids=(),
                        seed=0)
    finally:
        if saved is None:
            os.environ.pop("KERAS_ATTN_TORCH_COMPILE")
        else:
            os.environ["KERAS_ATTN_TORCH_COMPILE"] = saved
    began = time.perf_counter()
    engine.warm_up()
    warm_up_seconds = time.perf_counter() - began
    engine.start()
    try:
        # Warm-up of the rest (the first requests through the thread).
        warm = [engine.submit(prompt[:8], SamplingParams(max_new_tokens=4))
                for _, prompt, _ in requests[:max_batch]]
        for request in warm:
            request.result()
        stamps = [[] for _ in requests]
        handles = [None] * len(requests)

        def consume(index, request):
            for delta in request:
                now = time.perf_counter()
                stamps[index].extend([now] * len(delta.tokens))

        threads = []
        start = time.perf_counter()
        for index, (arrival, prompt, output_length) in enumerate(requests):
            wait_until(start + arrival)
            handles[index] = engine.submit(prompt, SamplingParams(max_new_tokens=output_length))
            thread = threading.Thread(target=consume, args=(index, handles[index]), daemon=True)
            thread.start()
            threads.append(thread)
        for thread in threads:
            thread.join()
    finally:
        engine.stop()
    return start, [list(h.tokens) for h in handles], stamps, warm_up_seconds


def static_batches(requests, max_batch):
    return [list(range(i, min(i + max_batch, len(requests))))
            for i in range(0, len(requests), max_batch)]


def run_static(model, requests, max_batch, torch_compile):
    """Contender (b): batches in arrival order; each batch's `generate` is
    timed and its tokens stamped at the batch's end on the virtual schedule
    (start at max(last arrival, previous end)). On torch the decoding step
    follows `torch_compile` (`KERAS_ATTN_TORCH_COMPILE`'s values) for this
    contender only."""
    batches = static_batches(requests, max_batch)
    if BACKEND == "torch":
        previous = os.environ.get("KERAS_ATTN_TORCH_COMPILE")
        os.environ["KERAS_ATTN_TORCH_COMPILE"] = torch_compile
        try:
            return _run_static(model, requests, batches)
        finally:
            if previous is None:
                os.environ.pop("KERAS_ATTN_TORCH_COMPILE", None)
            else:
                os.environ["KERAS_ATTN_TORCH_COMPILE"] = previous
    return _run_static(model, requests, batches)


def _run_static(model, requests, batches):

    def generate(batch):
        prompts = [requests[i][1] for i in batch]
        new_tokens = max(requests[i][2] for i in batch)
        return np.asarray(model.generate(prompts, new_tokens))

    for batch in batches:  # warm-up: every batch shape compiles (XLA) or warms
        generate(batch)
    tokens, stamps, step_seconds = [None] * len(requests), [None] * len(requests), []
    clock = 0.0
    for batch in batches:
        clock = max(clock, max(requests[i][0] for i in batch))
        began = time.perf_counter()
        output = generate(batch)
        seconds = time.perf_counter() - began
        clock += seconds
        step_seconds.append(seconds / output.shape[1])
        for row, i in enumerate(batch):
            tokens[i] = output[row, :requests[i][2]].tolist()
            stamps[i] = [clock] * requests[i][2]
    return 0.0, tokens, stamps, step_seconds


def run_transformers(transformers_model, requests, max_batch, max_length):
    """Contender (c): transformers' continuous batching manager on torch,
    whatever Keras' backend (on the GPU Keras computes on, else the CPU),
    requests added at their arrival times."""
    import torch
    import transformers

    transformers_model.to(placement.torch_device())
    settings = transformers.GenerationConfig(
        do_sample=False, max_new_tokens=max(r[2] for r in requests), eos_token_id=-1,
        pad_token_id=0,
    )
    batching = transformers.ContinuousBatchingConfig(
        page_size=BLOCK_SIZE, num_blocks=max_batch * (-(-max_length // BLOCK_SIZE)) * 2,
        max_requests_per_batch=max_batch,
    )
    with torch.inference_mode():
        manager = transformers_model.init_continuous_batching(
            generation_config=settings, continuous_batching_config=batching
        )
        # Its thread runs at full speed beside the main thread's idle OpenMP
        # workers only once they are handed back, as `Engine.start` does.
        release_thread_pool()
        manager.start()
        try:
            for prompt in (requests[0][1][:8], requests[1][1][:8]):  # warm-up
                manager.add_request(prompt, request_id=f"warm-{len(prompt)}-{prompt[0]}",
                                    max_new_tokens=4)
            got = 0
            while got < 2:
                result = manager.get_result(timeout=60)
                if result is None:
                    raise RuntimeError("transformers' manager gave no warm-up result in 60 s")
                got += result.is_finished()
            results = {}

            def collect():
                while len(results) < len(requests):
                    result = manager.get_result(timeout=1)
                    if result is None:
                        if not manager.is_running():
                            return
                        continue
                    if result.is_finished():
                        results[result.request_id] = result

            collector = threading.Thread(target=collect, daemon=True)
            collector.start()
            start = time.perf_counter()
            for index, (arrival, prompt, output_length) in enumerate(requests):
                wait_until(start + arrival)
                manager.add_request(prompt, request_id=f"r{index}", max_new_tokens=output_length,
                                    record_timestamps=True)
            collector.join()
        finally:
            manager.stop(block=True, timeout=30)
    if len(results) < len(requests):
        raise RuntimeError(f"transformers finished {len(results)} of {len(requests)} requests")
    ordered = [results[f"r{i}"] for i in range(len(requests))]
    errors = [r.error for r in ordered if r.error]
    if errors:
        raise RuntimeError(f"transformers reported: {errors[0]}")
    return start, [list(r.generated_tokens) for r in ordered], [list(r.timestamps) for r in ordered]


def percentiles(values):
    values = np.asarray(values, dtype=float)
    if values.size == 0:
        return {"p50": None, "p99": None}
    return {"p50": float(np.percentile(values, 50)), "p99": float(np.percentile(values, 99))}


def summarize(name, requests, start, tokens, stamps, load):
    """The row of one contender: throughput and latency percentiles, seconds."""
    arrivals = [start + r[0] for r in requests]
    lengths = [len(t) for t in tokens]
    wanted = [r[2] for r in requests]
    if lengths != wanted:
        bad = next(i for i, (a, b) in enumerate(zip(lengths, wanted)) if a != b)
        raise RuntimeError(f"{name}: request {bad} got {lengths[bad]} tokens, not {wanted[bad]}")
    end = max(s[-1] for s in stamps)
    ttft = [s[0] - a for s, a in zip(stamps, arrivals)]
    gaps = [later - earlier for s in stamps for earlier, later in itertools.pairwise(s)]
    # The first gap apart: a request whose prompt is encoded while every
    # decoding row is taken has its first token early and its second when
    # a row frees.
    second = [s[1] - s[0] for s in stamps if len(s) > 1]
    later = [b - a for s in stamps for a, b in itertools.pairwise(s[1:])]
    latency = [s[-1] - a for s, a in zip(stamps, arrivals)]
    seconds = end - arrivals[0]
    return {
        "contender": name,
        "seconds": seconds,
        "generated_tokens": int(sum(lengths)),
        "tokens_per_second": sum(lengths) / seconds,
        "time_to_first_token": percentiles(ttft),
        "time_between_tokens": percentiles(gaps),
        "first_to_second_token": percentiles(second),
        "time_between_later_tokens": percentiles(later),
        "end_to_end_latency": percentiles(latency),
        # Per request, in arrival order: where the percentiles come from.
        "time_to_first_token_each": [round(x, 4) for x in ttft],
        "end_to_end_latency_each": [round(x, 4) for x in latency],
        "load_average_1_minute": load,
    }


def mismatches(reference, other):
    """Requests whose greedy tokens differ, and the fraction of tokens equal."""
    differing = sum(a != b for a, b in zip(reference, other))
    equal = sum(x == y for a, b in zip(reference, other) for x, y in zip(a, b))
    return {"requests_differing": int(differing),
            "tokens_equal_fraction": equal / sum(len(a) for a in reference)}


def measured(name, run):
    before = os.getloadavg()[0]
    began = time.perf_counter()
    outcome = run()
    print(f"  {name}: done in {time.perf_counter() - began:.1f} s (warm-up included)")
    return outcome, {"before": before, "after": os.getloadavg()[0]}


def at_equal_latency(runs):
    """Throughput at equal p99 latency, from a sweep of arrival rates (`runs`,
    each `serve`'s result at one rate): for each p99 end-to-end latency that
    static batching reached in the sweep, the highest throughput each of the
    engine and static batching reached at a rate whose p99 end-to-end
    latency was at most that, and the engine's over static batching's.
    The engine's entry is None where none of its rates kept within it."""
    points = {key: [] for key in (ENGINE, STATIC)}
    for run in runs:
        for row in run["rows"]:
            if row["contender"] in points:
                points[row["contender"]].append((row["tokens_per_second"],
                                                 run["workload"]["rate_per_second"],
                                                 row["end_to_end_latency"]["p99"]))
    rows = []
    for bound in sorted({latency for _, _, latency in points[STATIC]}):
        best = {}
        for name, reached in points.items():
            within = [(throughput, rate) for throughput, rate, latency in reached
                      if latency <= bound]
            best[name] = None
            if within:
                throughput, rate = max(within)
                best[name] = {"rate_per_second": rate, "tokens_per_second": throughput}
        engine, static = best[ENGINE], best[STATIC]
        rows.append({
            "end_to_end_latency_p99_at_most": bound, "engine": engine, "static": static,
            "engine_over_static": None if engine is None
            else engine["tokens_per_second"] / static["tokens_per_second"],
        })
    return rows


def build(family):
    """keras_attn's model and transformers' for `family`, the same random
    weights (transformers' saved, keras_attn's loaded from the folder)."""
    with tempfile.TemporaryDirectory() as directory:
        transformers_model = generation.random_transformers_model(family, directory)
        model = keras_attn.build_transformer_model(directory)
    return model, transformers_model


def serve(family, args, rate, model, transformers_model):
    shape = MODELS[family]
    requests = workload(args.requests, rate, args.prompt_lengths, args.output_lengths,
                        shape["vocab_size"], args.seed)
    max_length = max(len(r[1]) + r[2] for r in requests)
    prefill_chunk = args.prefill_chunk
    if prefill_chunk is None:
        prefill_chunk = default_prefill_chunk(args.max_batch)
    print(f"{family}: {len(requests)} requests over {requests[-1][0]:.1f} s ({rate:g} per "
          f"second), {sum(r[2] for r in requests)} tokens to generate")
    rows, outputs, notes = [], {}, {}
    (start, tokens, stamps, warm_up_seconds), load = measured(
        "engine", lambda: run_engine(model, requests, args.max_batch, max_length, prefill_chunk,
                                     args.engine_torch_compile))
    rows.append(summarize(ENGINE, requests, start, tokens, stamps, load))
    rows[-1]["warm_up_seconds"] = warm_up_seconds
    outputs["engine"] = tokens
    (start, tokens, stamps, step_seconds), load = measured(
        "static", lambda: run_static(model, requests, args.max_batch, args.static_torch_compile))
    row = summarize(STATIC, requests, start, tokens, stamps, load)
    row["time_between_tokens"] = {"delivered": "all at the batch's end (gaps 0)",
                                  "seconds_per_decoding_step": percentiles(step_seconds)}
    for key in ("first_to_second_token", "time_between_later_tokens"):
        del row[key]
    rows.append(row)
    outputs["static"] = tokens
    if not args.no_transformers:
        try:
            (start, tokens, stamps), load = measured(
                "transformers", lambda: run_transformers(
                    transformers_model, requests, args.max_batch, max_length))
            rows.append(summarize("transformers continuous batching", requests, start, tokens,
                                  stamps, load))
            outputs["transformers"] = tokens
        except Exception as error:  # recorded, not hidden: why it has no row
            notes["transformers_error"] = f"{type(error).__name__}: {error}"
            print(f"  transformers not measured: {notes['transformers_error']}")
    by_name = {row["contender"]: row for row in rows}
    engine = by_name[ENGINE]
    result = {
        # generation.py's description, without its keras-hub contender.
        "model": shape["description"].split(": one transformers")[0]
        + f": one random {shape['transformers']}, saved and loaded by keras_attn",
        "workload": {
            "requests": len(requests), "rate_per_second": rate, "seed": args.seed,
            "prompt_lengths": list(args.prompt_lengths),
            "output_lengths": list(args.output_lengths),
            "last_arrival_seconds": requests[-1][0],
            "tokens_to_generate": sum(r[2] for r in requests),
            "greedy": True, "end_token": None,
        },
        "max_batch": args.max_batch, "block_size": BLOCK_SIZE, "prefill_chunk": prefill_chunk,
        "engine_max_length": max_length,
        "device": placement.device_name(),
        "rows": rows,
        "greedy_tokens": {"engine_vs_static": mismatches(outputs["static"], outputs["engine"])},
        **notes,
    }
    if BACKEND == "torch":
        from keras_attn.torch_runtime import compile_cache
        from keras_attn.torch_runtime import settings

        # Where torch's compile caches were, and how the engine's programs
        # reached torch.compile (on the CPU: their recordings, or their Python).
        result["compile_cache"] = compile_cache.ensure()._asdict()
        result["recorded_steps"] = settings.current().recorded_steps
    for key, peer in (("static", STATIC),
                      ("transformers", "transformers continuous batching")):
        if peer not in by_name:
            continue
        other = by_name[peer]
        result[f"engine_over_{key}"] = {
            "tokens_per_second": engine["tokens_per_second"] / other["tokens_per_second"],
            "time_to_first_token_p50": engine["time_to_first_token"]["p50"]
            / other["time_to_first_token"]["p50"],
            "time_to_first_token_p99": engine["time_to_first_token"]["p99"]
            / other["time_to_first_token"]["p99"],
            "end_to_end_latency_p50": engine["end_to_end_latency"]["p50"]
            / other["end_to_end_latency"]["p50"],
        }
        if key == "transformers":
            result["engine_over_transformers"]["time_between_tokens_p50"] = (
                engine["time_between_tokens"]["p50"] / other["time_between_tokens"]["p50"]
            )
            result["greedy_tokens"]["engine_vs_transformers"] = mismatches(
                outputs["transformers"], outputs["engine"])
    for row in rows:
        gaps = row["time_between_tokens"]
        gaps = gaps.get("seconds_per_decoding_step", gaps)
        ttft = row["time_to_first_token"]
        print(f"  {row['contender']:<34} {row['tokens_per_second']:7.1f} tokens/s  TTFT p50 "
              f"{ttft['p50']:.2f} s p99 {ttft['p99']:.2f}"
              f" s  between tokens p50 {gaps['p50'] * 1000:.0f} ms p99 {gaps['p99'] * 1000:.0f} ms"
              + ("" if "first_to_second_token" not in row else
                 f" (first to second p99 {row['first_to_second_token']['p99'] * 1000:.0f} ms, "
                 f"later p99 {row['time_between_later_tokens']['p99'] * 1000:.0f} ms)"))
    for key, value in result.items():
        if key.startswith("engine_over"):
            print(f"  {key}: " + ", ".join(f"{k} {v:.2f}x" for k, v in value.items()))
    print(f"  greedy tokens: {result['greedy_tokens']}")
    return result


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", choices=sorted(MODELS), default=["llama", "gpt2"])
    parser.add_argument("--requests", type=int, default=32)
    parser.add_argument("--rate", type=float, default=2.0, help="arrivals per second")
    parser.add_argument(
        "--rates", type=float, nargs="+", default=None,
        help="a sweep: the same requests at each of these arrival rates (arrival times scaled), "
             "and each contender's throughput at equal p99 end-to-end latency (replaces --rate)")
    parser.add_argument("--prompt-lengths", type=int, nargs=2, default=(8, 64))
    parser.add_argument("--output-lengths", type=int, nargs=2, default=(8, 64))
    parser.add_argument("--max-batch", type=int, default=4)
    parser.add_argument("--prefill-chunk", type=int, default=None,
                        help="the engine's prompt tokens per step (default: the engine's, "
                        "4 per row and at least 32)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--small", action="store_true",
                        help="12 requests, prompts and outputs of 8 to 32 tokens (a CPU run)")
    parser.add_argument("--no-transformers", action="store_true")
    parser.add_argument(
        "--static-torch-compile", choices=["0", "auto", "1"], default="1",
        help="KERAS_ATTN_TORCH_COMPILE for static batching on torch: 1 (default) compiles every "
             "batch's shape during the warm-up, as the engine's programs are; 0 runs its "
             "decoding step eagerly; auto compiles a shape once its eager steps took what "
             "compiling costs (which can fall inside the timed run)")
    parser.add_argument(
        "--engine-torch-compile", choices=["0", "auto", "1"], default="auto",
        help="KERAS_ATTN_TORCH_COMPILE for the engine on torch: auto (default) and 1 compile "
             "every program in Engine.warm_up, before the timed run; 0 runs them eagerly")
    parser.add_argument("--output-name", default=None)
    parser.add_argument("--output", default=None,
                        help="the folder of the results (default benchmarks/results)")
    args = parser.parse_args()
    if args.small:
        args.requests = SMALL["requests"]
        args.prompt_lengths, args.output_lengths = SMALL["prompt_lengths"], SMALL["output_lengths"]
    if args.requests < 2:
        parser.error("--requests must be at least 2")
    result = {}
    if BACKEND == "torch":
        result["static_batching_torch_compile"] = args.static_torch_compile
        result["engine_torch_step"] = (
            "eager" if args.engine_torch_compile == "0" else "compiled (torch.compile, warm_up)")
    name = args.output_name or f"serving_{BACKEND}.json"
    for family in args.models:  # written after each run, so a cut run keeps what it measured
        model, transformers_model = build(family)
        if args.rates is None:
            result[family] = serve(family, args, args.rate, model, transformers_model)
            write_result(result, args.output, name)
            continue
        sweep = result[family] = {"runs": []}
        for rate in args.rates:
            sweep["runs"].append(serve(family, args, rate, model, transformers_model))
            sweep["at_equal_latency"] = at_equal_latency(sweep["runs"])
            write_result(result, args.output, name)
        for row in sweep["at_equal_latency"]:
            engine = row["engine"] or {"rate_per_second": None, "tokens_per_second": float("nan")}
            print(f"  p99 end-to-end latency <= {row['end_to_end_latency_p99_at_most']:.2f} s: "
                  f"engine {engine['tokens_per_second']:.1f} tokens/s (rate "
                  f"{engine['rate_per_second']}), static {row['static']['tokens_per_second']:.1f}"
                  f" (rate {row['static']['rate_per_second']})")


if __name__ == "__main__":
    main()
