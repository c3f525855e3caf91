"""BERT-base speed, side by side with keras-hub and Hugging Face, on one backend.

In one process, on the backend KERAS_BACKEND selects, this measures:

- the machine's matmul rate on that backend (a jitted 4096 x 4096
  matmul; torch: `torch.matmul`) on the backend's device, in the compute
  dtype, the ceiling every result is compared with;
- keras_attn's BERT-base (12 layers, hidden 768, 12 heads, FFN 3072,
  random weights, float32 or the dtype policy `--dtype` names; transformers'
  model is cast to its compute dtype) and keras-hub's `BertBackbone` of the same size; on torch
  also keras_attn with `jit_compile=True` (each block structure compiled
  once by `torch.compile`, `keras_attn.torch_runtime.compiled_blocks`) and
  `transformers.BertModel` in eager mode;
- one call of the model on batch 1 x 8 (`model(inputs)` on inputs already
  on the device: jitted on JAX and TensorFlow, eager without gradients on
  torch), where the per-call overhead of the framework shows, inference
  (`predict_on_batch`) at batch 8 x 128, 2 x 512 and (on a GPU) 32 x 512,
  and one training step (forward, backward, AdamW) at 8 x 128; on a GPU
  also the call at 8 x 128, 2 x 512 and 32 x 512, inference at 1 x 8 and
  the training step at 2 x 512 (`--measurements` picks among them all).

Every contender computes on the backend's device (transformers' model and
inputs are moved to the GPU Keras uses; a run that would mix devices is
refused, `placement.check_placements`), and the result records each
contender's device. Each number is the median of `--repeats` timed runs after a warm-up run,
the contenders taking turns within each repetition; the warm-up (compile)
time is reported separately. Results are written as
JSON to `benchmarks/results/<backend>.json` (`<backend>_<dtype>.json` for
another dtype) and printed as a table with
ratios to the peers and fractions of the measured matmul rate.

    pip install -e ".[all,benchmarks]"
    KERAS_BACKEND=jax python benchmarks/bert_base.py
    KERAS_BACKEND=torch python benchmarks/bert_base.py --dtype bfloat16  # on a GPU

Not part of the test suite.
"""

import argparse
import dataclasses
import datetime
import json
import os
import platform
import statistics
import time

import keras
import numpy as np

import keras_attn
from keras_attn.torch_runtime import settings
import placement

BACKEND = keras.config.backend()
CONFIG = dict(
    vocab_size=30522, hidden_size=768, num_hidden_layers=12, num_attention_heads=12,
    intermediate_size=3072, max_position_embeddings=512, type_vocab_size=2,
)
SHAPES = {
    "call 1x8": (1, 8), "inference 8x128": (8, 128), "inference 2x512": (2, 512),
    "inference 32x512": (32, 512), "train step 8x128": (8, 128),
    "call 8x128": (8, 128), "call 32x512": (32, 512),
    "inference 1x8": (1, 8), "call 2x512": (2, 512), "train step 2x512": (2, 512),
}
# Measured by default on a GPU only: 32 x 512 takes some 20 s a call on a
# 2-core CPU, and there a call and `predict_on_batch` differ by nothing but
# the copies between host and device, which the GPU rows separate (so the
# CPU's rows stay those committed; a second training shape likewise).
GPU_ONLY_SHAPES = (
    "inference 32x512", "call 8x128", "call 32x512", "inference 1x8", "call 2x512",
    "train step 2x512",
)


# A contender measured only when `--models` names it (`ours_einsum_attention`).
EINSUM_CONTENDER = "keras_attn (einsum attention)"


def mode_of(label):
    """`"call"`, `"inference"` or `"train"`: what a measurement runs."""
    return {"call": "call", "inference": "inference", "train": "train"}[label.split()[0]]


def timed_side_by_side(functions, repeats, warm_ups=None, untimed_calls=0):
    """`{key: (warm-up seconds, median seconds of `repeats` runs)}`.

    Every function is warmed up first (by itself, or by `warm_ups[key]` where
    given: a cheaper call that compiles or caches the same thing); then each
    repetition runs all of them in turn, so a machine that drifts (clock,
    other load) drifts for every contender alike instead of favouring
    whichever ran first. `untimed_calls` more calls follow each warm-up:
    Keras' torch train step under `torch.compile` compiles again on its
    second call (the gradients exist from then on, and the optimizer has
    made its weight-decay cache).
    """
    warm_ups = warm_ups or {}
    warm_up = {}
    for key, function in functions.items():
        start = time.perf_counter()
        warm_ups.get(key, function)()
        warm_up[key] = time.perf_counter() - start
        for _ in range(untimed_calls):
            function()
    times = {key: [] for key in functions}
    for _ in range(repeats):
        for key, function in functions.items():
            start = time.perf_counter()
            function()
            times[key].append(time.perf_counter() - start)
    return {key: (warm_up[key], statistics.median(times[key])) for key in functions}


def timed(function, repeats, warm_up=None):
    """(warm-up seconds, median seconds of `repeats` runs) of one function."""
    return timed_side_by_side({None: function}, repeats, warm_up and {None: warm_up})[None]


def matmul_flops_per_second(repeats, dtype="float32"):
    """The best `dtype` matmul rate over a square 4096 matmul and BERT-base's
    feed-forward shape, `(1024, 768) @ (768, 3072)`, on the device the
    backend computes on."""
    rates = []
    for m, k, n in ((4096, 4096, 4096), (1024, 768, 3072)):
        a = np.random.default_rng(0).normal(size=(m, k)).astype("float32")
        b = np.random.default_rng(1).normal(size=(k, n)).astype("float32")
        if BACKEND == "jax":
            import jax

            x, y = (jax.device_put(v).astype(dtype) for v in (a, b))
            function = jax.jit(lambda p, q: p @ q)
            run = lambda: function(x, y).block_until_ready()  # noqa: E731
        elif BACKEND == "tensorflow":
            import tensorflow as tf

            x, y = tf.cast(a, dtype), tf.cast(b, dtype)
            function = tf.function(lambda p, q: tf.matmul(p, q), jit_compile=True)
            run = lambda: function(x, y).numpy()  # noqa: E731
        else:
            import torch

            device = placement.torch_device()  # where Keras computes
            x, y = (torch.from_numpy(v).to(device, getattr(torch, dtype)) for v in (a, b))

            def run():
                torch.matmul(x, y)
                placement.synchronize(device)

        _, seconds = timed(run, max(repeats, 5))
        rates.append(2 * m * k * n / seconds)
    return max(rates)


def forward_flops(batch, length, training):
    """Matrix-product FLOPs of BERT-base (no embeddings lookup, no softmax);
    a training step counts three forward passes."""
    hidden, layers, ffn = 768, 12, 3072
    tokens = batch * length
    per_layer = 2 * tokens * (4 * hidden * hidden + 2 * hidden * ffn)
    attention = 2 * 2 * batch * length * length * hidden
    total = layers * (per_layer + attention)
    return 3 * total if training else total


def inputs_for(batch, length, names):
    rng = np.random.default_rng(0)
    tokens = rng.integers(1000, 30000, size=(batch, length)).astype("int32")
    return {
        names["tokens"]: tokens,
        names["segments"]: np.zeros_like(tokens),
        **({names["padding"]: np.ones_like(tokens)} if "padding" in names else {}),
    }


def keras_runner(model, names, jit_compile=None, optimizer=None):
    """Inference and training-step closures for a Keras model with one
    sequence output, jit-compiled on TensorFlow and JAX (and on torch with
    `jit_compile=True`: its blocks compiled by `torch.compile`, or Keras'
    whole steps with `KERAS_ATTN_COMPILE_BLOCKS=0`).
    The optimizer is `keras.optimizers.AdamW(1e-5)` unless given."""
    if jit_compile is None:
        jit_compile = BACKEND != "torch"
    optimizer = optimizer or keras.optimizers.AdamW(1e-5)
    model.compile(optimizer=optimizer, loss="mse", jit_compile=jit_compile)

    def make(batch, length, mode):
        if mode is None:
            return model  # asked for the model itself (its execution plan)
        data = inputs_for(batch, length, names)
        if mode == "call":
            # Keras' whole-step compile leaves the call eager: no row.
            whole_step = BACKEND == "torch" and not settings.current().compile_blocks
            return None if jit_compile and whole_step else device_forward(model, data)
        if mode == "train":
            target = np.zeros((batch, length, 768), "float32")
            return lambda: model.train_on_batch(data, target)
        return lambda: model.predict_on_batch(data)

    return make


def compiled_call(model, after=None):
    """`call(inputs, *extra)`: `after(model(inputs), *extra)` (the model's
    output when `after` is None), jit-compiled on JAX and TensorFlow (one
    compilation per input shape), eager without gradients on torch.
    `after` runs inside the compiled function, so what it reduces the
    output to (say, one token per row) is all that leaves the device."""
    after = after or (lambda outputs: outputs)
    if BACKEND == "jax":
        import jax

        function = jax.jit(lambda t, n, x, *e: after(model.stateless_call(t, n, x)[0], *e))

        def call(inputs, *extra):
            # The variables' current buffers: Keras' jitted predict and
            # train steps donate the buffers they were given.
            trainable = [v.value for v in model.trainable_variables]
            non_trainable = [v.value for v in model.non_trainable_variables]
            return function(trainable, non_trainable, inputs, *extra)

        return call
    if BACKEND == "torch":
        import torch

        def call(inputs, *extra):
            with torch.no_grad():
                return after(model(inputs), *extra)

        return call
    import tensorflow as tf

    return tf.function(lambda inputs, *extra: after(model(inputs), *extra), jit_compile=True)


def device_forward(model, data):
    """A no-argument function running `model` on `data` placed on the
    backend's device beforehand, returning once the result is computed
    (`compiled_call`). Unlike `predict_on_batch`, nothing is copied between
    host and device inside the timed call, so GPU timings measure the
    computation."""
    call = compiled_call(model)
    inputs = {name: keras.ops.convert_to_tensor(value) for name, value in data.items()}
    if BACKEND == "jax":
        import jax

        return lambda: jax.block_until_ready(call(inputs))
    if BACKEND == "torch":
        import torch

        def run():
            call(inputs)
            if torch.cuda.is_available():
                torch.cuda.synchronize()

        return run
    import tensorflow as tf

    def run():
        call(inputs)
        tf.test.experimental.sync_devices()

    return run


def ours(jit_compile=None):
    """keras_attn's BERT-base with keras_attn's `AdamW` (Keras' AdamW with a
    one-pass torch update; Keras' own on TensorFlow and JAX)."""
    model = keras_attn.build_transformer_model(CONFIG, dropout_rate=0.1)
    return keras_runner(
        model, {"tokens": "token_ids", "segments": "segment_ids"}, jit_compile,
        keras_attn.optimizers.AdamW(1e-5),
    )


def ours_einsum_attention():
    """keras_attn's BERT-base with every attention layer on its einsum path
    (scores, a float32 masked softmax, the value product), as keras-hub's
    `BertBackbone` computes attention (its dropout keeps Keras'
    `MultiHeadAttention` off `dot_product_attention`), rather than the
    backend's fused kernel (`keras.ops.dot_product_attention`; on JAX on a
    GPU, cuDNN's flash attention where it applies). Named in `--models`
    only: it separates the kernel's share of a gap to keras-hub (issue 30,
    item 5). Replaces the layers' kernels with copies whose `fused` is
    False (the layers' `fused_attention`, which the builder does not
    expose)."""
    model = keras_attn.build_transformer_model(CONFIG, dropout_rate=0.1)
    attention = [
        layer for layer in model._flatten_layers()
        if isinstance(layer, keras_attn.layers.MultiHeadAttention)
    ]
    assert len(attention) == CONFIG["num_hidden_layers"], attention
    for layer in attention:
        layer._kernel = dataclasses.replace(layer._kernel, fused=False)
    return keras_runner(
        model, {"tokens": "token_ids", "segments": "segment_ids"}, None,
        keras_attn.optimizers.AdamW(1e-5),
    )


def ours_torch_compiled():
    """keras_attn on torch with `compile(jit_compile=True)`: each block
    structure compiled once by `torch.compile` (inductor), the rest eager
    (`KERAS_ATTN_COMPILE_BLOCKS=0`: Keras' whole steps compiled)."""
    return ours(jit_compile=True)


def keras_hub():
    import keras_hub

    backbone = keras_hub.models.BertBackbone(
        vocabulary_size=30522, num_layers=12, num_heads=12, hidden_dim=768,
        intermediate_dim=3072, max_sequence_length=512,
    )
    # The sequence output alone, as keras_attn's encoder returns.
    model = keras.Model(backbone.input, backbone.output["sequence_output"])
    names = {"tokens": "token_ids", "segments": "segment_ids", "padding": "padding_mask"}
    return keras_runner(model, names)


def transformers_eager():
    """transformers' `BertModel` (eager, its default attention: SDPA), its
    weights and inputs on the device Keras computes on
    (`placement.torch_device`), in the dtype of Keras' global policy
    (`--dtype`)."""
    import torch
    import transformers

    device = placement.torch_device()
    dtype = getattr(torch, keras.config.dtype_policy().compute_dtype)
    model = transformers.BertModel(transformers.BertConfig(**CONFIG)).to(device, dtype)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-5)

    def make(batch, length, mode):
        if mode is None:
            return model
        tokens = inputs_for(batch, length, {"tokens": "t", "segments": "s"})["t"]
        tokens = torch.from_numpy(tokens).long().to(device)
        if mode == "train":
            def step():
                model.train()
                optimizer.zero_grad()
                loss = model(input_ids=tokens).last_hidden_state.square().mean()
                loss.backward()
                optimizer.step()
                placement.synchronize(device)

            return step

        def infer():
            model.eval()
            with torch.no_grad():
                model(input_ids=tokens)
            placement.synchronize(device)

        return infer

    return make


def torch_eager_calls(config, tokens, jit_compile=False):
    """`(ours, theirs)`: one call without gradients of keras_attn's BERT
    (`model(inputs)`; with `jit_compile`, its blocks compiled) and of
    transformers' `BertModel` of `config` (eager, in the compute dtype of
    Keras' global policy), on int32 `tokens` (segment 0) already on the
    device Keras computes on (torch only; each returns without waiting for
    the device)."""
    import torch
    import transformers

    model = keras_attn.build_transformer_model(config)
    if jit_compile:
        model.compile(jit_compile=True)
    inputs = {
        "token_ids": keras.ops.convert_to_tensor(tokens),
        "segment_ids": keras.ops.convert_to_tensor(np.zeros_like(tokens)),
    }
    device = placement.torch_device()
    dtype = getattr(torch, keras.config.dtype_policy().compute_dtype)
    reference = transformers.BertModel(transformers.BertConfig(**config)).to(device, dtype).eval()
    ids = torch.from_numpy(tokens).long().to(device)

    def ours():
        with torch.no_grad():
            model(inputs)

    def theirs():
        with torch.no_grad():
            reference(input_ids=ids)

    return ours, theirs


def versions():
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version

    def installed(name):
        try:
            return version(name)
        except PackageNotFoundError:
            return None

    names = ["keras", "keras-hub", {"jax": "jax", "tensorflow": "tensorflow", "torch": "torch"}[BACKEND]]
    if BACKEND == "torch":
        names.append("transformers")
    found = {name: installed(name) for name in names}
    return {name: v for name, v in found.items() if v} | {"keras_attn": keras_attn.__version__}


def write_result(result, output, filename):
    """Writes `result`, headed by the backend, date, machine and versions, as
    JSON to `output` (default `benchmarks/results/`)."""
    result = {
        "backend": BACKEND,
        "date": datetime.date.today().isoformat(),
        "machine": f"{platform.machine()}, {os.cpu_count()} CPU cores",
        "versions": versions(),
        **result,
    }
    output = output or os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")
    os.makedirs(output, exist_ok=True)
    path = os.path.join(output, filename)
    with open(path, "w") as file:
        json.dump(result, file, indent=2)
    print(f"wrote {path}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="one repeat, call 1x8 and inference 8x128 only")
    parser.add_argument("--output", default=None)
    parser.add_argument(
        "--dtype", default="float32", choices=["float32", "bfloat16", "mixed_bfloat16"],
        help="Keras' global dtype policy for the Keras models; transformers' model is cast to "
             "its compute dtype, and the matmul peak is measured in it",
    )
    parser.add_argument(
        "--models", nargs="*", default=None,
        help="only these contenders (e.g. 'keras_attn' 'transformers (eager)'); all by default",
    )
    parser.add_argument(
        "--measurements", nargs="*", default=None, choices=list(SHAPES),
        help="only these measurements; all by default",
    )
    parser.add_argument(
        "--flash-attention", default="auto", choices=["auto", "off"],
        help="'off': keras.config.disable_flash_attention(), so that keras.ops."
             "dot_product_attention takes XLA's composition rather than cuDNN's flash "
             "kernel on JAX (keras_attn on torch calls torch's kernel itself: no change)",
    )
    arguments = parser.parse_args()
    repeats = 1 if arguments.quick else arguments.repeats
    keras.config.set_dtype_policy(arguments.dtype)
    compute_dtype = keras.config.dtype_policy().compute_dtype
    on_gpu = placement.device_kind(placement.device_name()) == "gpu"
    shapes = {
        label: shape for label, shape in SHAPES.items() if on_gpu or label not in GPU_ONLY_SHAPES
    }
    if arguments.quick:
        shapes = {label: SHAPES[label] for label in ("call 1x8", "inference 8x128")}
    if arguments.measurements:
        shapes = {label: SHAPES[label] for label in arguments.measurements}

    load_before = os.getloadavg()[0]
    peak = matmul_flops_per_second(repeats, compute_dtype)
    print(f"backend={BACKEND}: {compute_dtype} matmul {peak / 1e9:.1f} GFLOP/s")
    if arguments.flash_attention == "off":
        keras.config.disable_flash_attention()
    contenders = {"keras_attn": ours, "keras-hub": keras_hub}
    if BACKEND == "torch":
        contenders["keras_attn (torch.compile)"] = ours_torch_compiled
        contenders["transformers (eager)"] = transformers_eager
    contenders = {
        name: factory for name, factory in contenders.items()
        if not arguments.models or name in arguments.models
    }
    if arguments.models and EINSUM_CONTENDER in arguments.models:
        contenders[EINSUM_CONTENDER] = ours_einsum_attention
    devices = placement.check_placements({
        name: placement.torch_device_name(placement.torch_device())
        if name.startswith("transformers") else placement.device_name()
        for name in contenders
    })
    print(f"devices: {devices}")
    functions = {}
    makers = {}
    for name, factory in contenders.items():
        make = makers[name] = factory()
        for label, (batch, length) in shapes.items():
            function = make(batch, length, mode_of(label))
            if function is not None:
                functions[name, label] = function
    timings = timed_side_by_side(functions, repeats, untimed_calls=1)
    rows = []
    for (name, label), (warm_up, seconds) in timings.items():
        batch, length = shapes[label]
        flops = forward_flops(batch, length, label.startswith("train"))
        rows.append(
            {
                "model": name, "measurement": label, "seconds": seconds,
                "warm_up_seconds": warm_up, "tokens_per_second": batch * length / seconds,
                "fraction_of_matmul_peak": flops / seconds / peak,
            }
        )
        print(
            f"{name:<26} {label:<17} {seconds * 1000:>8.0f} ms  "
            f"{batch * length / seconds:>8.0f} tokens/s  {flops / seconds / peak:>5.1%} of peak  "
            f"(warm-up {warm_up:.1f} s)"
        )
    for row in rows:
        for peer_name, key in (("keras-hub", "speed_vs_keras_hub"),
                               ("transformers (eager)", "speed_vs_transformers")):
            peer = next(
                (r for r in rows
                 if r["model"] == peer_name and r["measurement"] == row["measurement"]),
                None,
            )
            if peer is not None:
                row[key] = peer["seconds"] / row["seconds"]
        if "speed_vs_transformers" in row:
            print(f"{row['model']:<26} {row['measurement']:<17} "
                  f"{row['speed_vs_transformers']:.2f}x transformers (eager)")
    result = {
        "devices": devices, "matmul_device": placement.device_name(),
        "dtype_policy": arguments.dtype, "matmul_dtype": compute_dtype,
        "flash_attention": arguments.flash_attention,
        "matmul_gflops": peak / 1e9, "repeats": repeats,
        "load_average_1_minute": {"before": load_before, "after": os.getloadavg()[0]},
        "rows": rows,
        # Which path each keras_attn model took, after the runs (on torch:
        # the direct pass, compiled blocks, CUDA graphs; keras_attn.explain).
        "execution_plans": {
            name: str(model.execution_plan()) for name, make in makers.items()
            if hasattr(model := make(None, None, None), "execution_plan")
        },
    }
    suffix = "" if arguments.dtype == "float32" else f"_{arguments.dtype}"
    write_result(result, arguments.output, f"{BACKEND}{suffix}.json")


if __name__ == "__main__":
    main()
