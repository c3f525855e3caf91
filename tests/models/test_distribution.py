"""Training the builder's models on several devices.

JAX reads `--xla_force_host_platform_device_count` and TensorFlow fixes its
logical devices only when their runtimes start, so every multi-device check
runs in a fresh Python process on virtual CPU devices. The process prints one
`RESULT {json}` line that the test asserts on; the single-device reference
runs in the same process, before the distribution is set.
"""

import json
import math
import os
import pathlib
import subprocess
import sys
import textwrap

import keras
import pytest

import keras_attn

BACKEND = keras.config.backend()
REPO_ROOT = pathlib.Path(__file__).resolve().parents[2]

CONFIG = dict(
    vocab_size=100,
    hidden_size=32,
    num_layers=2,
    num_heads=4,
    intermediate_size=64,
    max_position=16,
    dropout_rate=0.0,
    attention_dropout_rate=0.0,
)

# Written here independently of keras_attn.models.layout_map: the layer-relative
# path of every sharded variable and its axes; every other variable is replicated.
MEGATRON_AXES = {
    "MultiHeadSelfAttention/query_dense/kernel": (None, "model"),
    "MultiHeadSelfAttention/query_dense/bias": ("model",),
    "MultiHeadSelfAttention/key_dense/kernel": (None, "model"),
    "MultiHeadSelfAttention/key_dense/bias": ("model",),
    "MultiHeadSelfAttention/value_dense/kernel": (None, "model"),
    "MultiHeadSelfAttention/value_dense/bias": ("model",),
    "MultiHeadSelfAttention/output_dense/kernel": ("model", None),
    "FeedForward/intermediate_dense/kernel": (None, "model"),
    "FeedForward/intermediate_dense/bias": ("model",),
    "FeedForward/gate_dense/kernel": (None, "model"),
    "FeedForward/gate_dense/bias": ("model",),
    "FeedForward/output_dense/kernel": ("model", None),
}
# The models the layout is checked on: their application, their fields
# beyond CONFIG and their sharded variables per block. LLaMA has two
# key/value heads under four query heads (its key and value kernels are
# half as wide; four devices hold half a key/value head each), a gated
# feed-forward and biases on the feed-forward only.
SETUPS = {
    "bert": ("mlm", {}, 10),
    "talking_heads": ("mlm", {}, 10),
    "llama": ("lm", {"num_key_value_heads": 2, "mlp_bias": True}, 9),
}


def build_setup(variant):
    application, fields, _ = SETUPS[variant]
    return keras_attn.build_transformer_model(
        dict(CONFIG, **fields), variant=variant, application=application
    )


def expected_axes(path):
    """The Megatron axes of a variable path, or None when replicated."""
    for suffix, axes in MEGATRON_AXES.items():
        if path.startswith("Transformer-") and path.endswith(suffix):
            return axes
    return None


# Shared by the subprocesses: the config, a padded classification data set in
# which label 1 means token 7 occurs, and a builder encoder with a Dense head.
PRELUDE = """
import json
import keras
import numpy as np
import keras_attn

CONFIG = json.loads({config!r})


def dataset(count=64, length=12, seed=0):
    rng = np.random.default_rng(seed)
    tokens = rng.integers(8, CONFIG["vocab_size"], size=(count, length)).astype("int32")
    labels = rng.integers(0, 2, size=count).astype("int32")
    for row in range(count):
        if labels[row]:
            tokens[row, rng.integers(1, 6)] = 7
        tokens[row, rng.integers(7, length + 1):] = 0
    return {{"token_ids": tokens, "segment_ids": np.zeros_like(tokens)}}, labels


def classifier(probe=None):
    encoder = keras_attn.build_transformer_model(CONFIG)
    hidden = encoder.output if probe is None else probe(encoder.output)
    logits = keras.layers.Dense(2, name="Classifier")(hidden[:, 0])
    return keras.Model(encoder.input, logits)


def report(**values):
    print("RESULT " + json.dumps(values))
"""


def run_script(body, backend, extra_env=None, timeout=300):
    """Runs PRELUDE + `body` in a fresh interpreter on `backend`; returns the
    dict it reported."""
    script = PRELUDE.format(config=json.dumps(CONFIG)) + textwrap.dedent(body)
    env = dict(os.environ, KERAS_BACKEND=backend, TF_CPP_MIN_LOG_LEVEL="2")
    env.update(extra_env or {})
    result = subprocess.run(
        [sys.executable, "-c", script],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert result.returncode == 0, (
        f"The {backend} subprocess exited with {result.returncode}.\n"
        f"stdout:\n{result.stdout[-4000:]}\nstderr:\n{result.stderr[-8000:]}"
    )
    lines = [line for line in result.stdout.splitlines() if line.startswith("RESULT ")]
    assert len(lines) == 1, result.stdout[-4000:]
    return json.loads(lines[0].removeprefix("RESULT "))


def run_on_eight_jax_cpus(body):
    flags = os.environ.get("XLA_FLAGS", "")
    return run_script(
        body,
        "jax",
        extra_env={
            "JAX_PLATFORMS": "cpu",
            "XLA_FLAGS": f"{flags} --xla_force_host_platform_device_count=8".strip(),
        },
    )


jax_only = pytest.mark.skipif(BACKEND != "jax", reason="keras.distribution runs on JAX")


# The layout table: no devices needed ---------------------------------------


def fake_mesh(shape=(2, 4), axis_names=("batch", "model")):
    """A mesh over placeholder devices: layouts and their lookups never touch
    the backend's devices."""
    devices = [f"cpu:{index}" for index in range(math.prod(shape))]
    return keras.distribution.DeviceMesh(shape, list(axis_names), devices=devices)


@pytest.mark.parametrize("variant", SETUPS)
def test_layout_map_gives_megatron_axes_to_every_variable(variant):
    model = build_setup(variant)
    mesh = fake_mesh()
    layout_map = keras_attn.get_layout_map(mesh)
    sharded = 0
    for variable in model.weights:
        expected = expected_axes(variable.path)
        # A lookup matching two keys raises, so this also checks they are disjoint.
        for path in (variable.path, f"Outer-Model/{variable.path}"):
            layout = layout_map[path]
            assert (None if layout is None else layout.axes) == expected, path
            if layout is not None:
                assert layout.device_mesh is mesh
                assert len(layout.axes) == len(variable.shape), path
        sharded += expected is not None
    assert sharded == CONFIG["num_layers"] * SETUPS[variant][2]
    if variant == "talking_heads":
        mixing = [v.path for v in model.weights if "softmax_kernel" in v.path]
        assert len(mixing) == 2 * CONFIG["num_layers"]
        assert all(layout_map[path] is None for path in mixing)


def test_layout_map_ignores_lookalike_paths():
    layout_map = keras_attn.get_layout_map(fake_mesh())
    for path in (
        "Transformer-0-MultiHeadSelfAttention-Norm/gamma",
        "MyTransformer-0-MultiHeadSelfAttention/query_dense/kernel",
        "Transformer-0-MultiHeadSelfAttention/query_dense/kernel/extra",
        "Pooler-Dense/kernel",
        "MLM-Dense/kernel",
    ):
        assert layout_map[path] is None, path


def test_layout_map_uses_the_given_model_axis():
    mesh = fake_mesh(axis_names=("data", "tensor"))
    layout_map = keras_attn.get_layout_map(mesh, model_axis="tensor")
    prefix = "Transformer-1-"
    assert layout_map[prefix + "MultiHeadSelfAttention/value_dense/kernel"].axes == (
        None,
        "tensor",
    )
    assert layout_map[prefix + "FeedForward/output_dense/kernel"].axes == ("tensor", None)


def test_mesh_without_the_model_axis_is_an_error():
    mesh = fake_mesh(shape=(8,), axis_names=("batch",))
    with pytest.raises(ValueError, match=r"no axis 'model'.*\['batch'\]"):
        keras_attn.get_layout_map(mesh)
    with pytest.raises(ValueError, match=r"no axis 'tensor'.*\['batch', 'model'\]"):
        keras_attn.get_layout_map(fake_mesh(), model_axis="tensor")


# JAX: data and model parallelism over eight virtual CPUs -------------------

DATA_PARALLEL = """
import jax

shardings = []


class ShardingProbe(keras.layers.Layer):
    # Records, while fit's step is compiled, how XLA lays out the activations.
    def call(self, inputs):
        jax.debug.inspect_array_sharding(
            inputs,
            # Only the mesh's named shardings have a spec; one device has none.
            callback=lambda sharding: shardings.append(
                [list(getattr(sharding, "spec", [])), list(sharding.shard_shape(inputs.shape))]
            ),
        )
        return inputs


inputs, labels = dataset()


def train(model):
    model.compile(
        optimizer=keras.optimizers.Adam(1e-3),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    )
    history = model.fit(inputs, labels, batch_size=16, epochs=3, shuffle=False, verbose=0)
    return history.history["loss"]


keras.utils.set_random_seed(0)
single = classifier(ShardingProbe())
initial = single.get_weights()
single_losses = train(single)

devices = keras.distribution.list_devices()
keras.distribution.set_distribution(keras.distribution.DataParallel(devices=devices))
shardings.clear()
model = classifier(ShardingProbe())
model.set_weights(initial)
losses = train(model)

replicated = [
    variable.value.sharding.is_fully_replicated
    and len(variable.value.sharding.device_set) == len(devices)
    for variable in model.weights + model.optimizer.variables
]
report(
    devices=len(devices),
    single_losses=single_losses,
    losses=losses,
    replicated=sum(replicated),
    variables=len(replicated),
    shardings=shardings,
)
"""


@jax_only
def test_data_parallel_fit_matches_one_device():
    result = run_on_eight_jax_cpus(DATA_PARALLEL)
    assert result["devices"] == 8
    # Every weight and optimizer slot is a full copy on all eight devices.
    assert result["replicated"] == result["variables"] > 0
    # Each device gets 16 / 8 = 2 examples of every batch.
    assert result["shardings"], "the probe never ran inside fit"
    for spec, shard_shape in result["shardings"]:
        assert spec[0] == "batch" and all(axis is None for axis in spec[1:]), spec
        assert shard_shape == [2, 12, CONFIG["hidden_size"]], shard_shape
    # Same seed, weights and batches: the gradients are all-reduced means of the
    # same examples, so the losses agree up to summation order.
    single, distributed = result["single_losses"], result["losses"]
    assert len(single) == len(distributed) == 3
    assert single[-1] < single[0], single
    for one, eight in zip(single, distributed):
        assert one == pytest.approx(eight, rel=1e-4), (single, distributed)


MODEL_PARALLEL = """
rng = np.random.default_rng(1)
inputs_all, _ = dataset(count=16)
tokens = inputs_all["token_ids"]
mesh = keras.distribution.DeviceMesh(
    (2, 4), ["batch", "model"], keras.distribution.list_devices()
)
model_parallel = keras.distribution.ModelParallel(
    layout_map=keras_attn.get_layout_map(mesh), batch_dim_name="batch"
)


SETUPS = {setups!r}


def build(variant):
    application, fields, _ = SETUPS[variant]
    model = keras_attn.build_transformer_model(
        dict(CONFIG, **fields), variant=variant, application=application
    )
    # The mlm application predicts its own input tokens, the lm application
    # the next ones (padding ignored).
    model.compile(
        optimizer=keras.optimizers.Adam(1e-3),
        loss=keras_attn.TokenCrossEntropy(ignore_id=0, from_logits=True),
    )
    return model


def train(model, inputs):
    history = model.fit(inputs, tokens, batch_size=8, epochs=3, shuffle=False, verbose=0)
    return history.history["loss"]


results = {}
for variant in SETUPS:
    # LLaMA has no token types.
    inputs = {key: inputs_all[key] for key in inputs_all if variant != "llama" or key == "token_ids"}
    keras.distribution.set_distribution(None)
    reference = build(variant)
    # Weights far from their small initial values, so every kernel matters.
    weights = [
        rng.normal(0.0, 0.2, size=weight.shape).astype("float32")
        for weight in reference.get_weights()
    ]
    reference.set_weights(weights)
    expected = np.asarray(reference.predict(inputs, batch_size=8, verbose=0))
    reference_losses = train(reference, inputs)

    keras.distribution.set_distribution(model_parallel)
    model = build(variant)
    model.set_weights(weights)
    outputs = np.asarray(model.predict(inputs, batch_size=8, verbose=0))
    losses = train(model, inputs)

    def layouts(variables):
        found = {}
        for variable in variables:
            sharding = variable.value.sharding
            spec = list(sharding.spec) + [None] * (len(variable.shape) - len(sharding.spec))
            found[variable.path] = dict(
                spec=spec,
                shape=list(variable.shape),
                shard_shape=list(sharding.shard_shape(variable.shape)),
            )
        return found

    results[variant] = dict(
        max_difference=float(np.abs(outputs - expected).max()),
        output_scale=float(np.abs(expected).max()),
        reference_losses=reference_losses,
        losses=losses,
        weights=layouts(model.weights),
        optimizer_variables=layouts(model.optimizer.variables),
    )
report(**results)
"""


@jax_only
def test_model_parallel_shards_kernels_and_matches_unsharded():
    result = run_on_eight_jax_cpus(MODEL_PARALLEL.replace("{setups!r}", repr(SETUPS)))
    assert sorted(result) == sorted(SETUPS)
    for variant, values in result.items():
        sharded = 0
        for path, layout in values["weights"].items():
            axes = expected_axes(path)
            if axes is None:
                assert layout["spec"] == [None] * len(layout["shape"]), (variant, path, layout)
                continue
            sharded += 1
            assert tuple(layout["spec"]) == axes, (variant, path, layout)
            # Four devices on "model": each holds a quarter of the split dimension.
            split = axes.index("model")
            expected_shard = list(layout["shape"])
            expected_shard[split] //= 4
            assert layout["shard_shape"] == expected_shard, (variant, path, layout)
        assert sharded == CONFIG["num_layers"] * SETUPS[variant][2], variant
        # Adam's slots are laid out like their variables.
        slots = {
            path: layout
            for path, layout in values["optimizer_variables"].items()
            if "query_dense_kernel" in path
        }
        assert len(slots) == 2 * CONFIG["num_layers"], sorted(slots)
        assert all(layout["spec"] == [None, "model"] for layout in slots.values()), slots
        # The same function of the same weights: outputs and training agree.
        assert values["output_scale"] > 0.1, values["output_scale"]
        assert values["max_difference"] < 1e-5, (variant, values["max_difference"])
        reference, losses = values["reference_losses"], values["losses"]
        assert losses[-1] < losses[0], (variant, losses)
        for one, sharded_loss in zip(reference, losses):
            assert one == pytest.approx(sharded_loss, rel=1e-4), (variant, reference, losses)


# TensorFlow: tf.distribute.MirroredStrategy over two logical CPUs ---------

MIRRORED = """
import tensorflow as tf

cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(
    cpu, [tf.config.LogicalDeviceConfiguration()] * 2
)
inputs, labels = dataset()


def train(model):
    # SGD with momentum is linear in the gradient, so one device and two
    # agree. Adam and RMSprop would not, exactly: the position table's
    # gradient is sparse (tf.IndexedSlices), the all-reduce concatenates the
    # two replicas' slices, and Keras squares slice by slice, so the second
    # moment gets g1**2 + g2**2 where one device has (g1 + g2)**2.
    model.compile(
        optimizer=keras.optimizers.SGD(0.005, momentum=0.9),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    )
    history = model.fit(inputs, labels, batch_size=16, epochs=3, shuffle=False, verbose=0)
    return history.history["loss"]


keras.utils.set_random_seed(0)
single = classifier()
initial = single.get_weights()
single_losses = train(single)

strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
with strategy.scope():
    model = classifier()
    model.set_weights(initial)
    losses = train(model)
kernel = model.get_layer("Transformer-0-MultiHeadSelfAttention").query_dense.kernel.value
report(
    replicas=strategy.num_replicas_in_sync,
    kernel_devices=sorted(component.device for component in kernel.values),
    single_losses=single_losses,
    losses=losses,
)
"""


@pytest.mark.skipif(BACKEND != "tensorflow", reason="tf.distribute needs TensorFlow")
def test_mirrored_strategy_fit_matches_one_device():
    result = run_script(MIRRORED, "tensorflow")
    assert result["replicas"] == 2
    devices = result["kernel_devices"]
    assert len(devices) == 2 and devices[0].endswith("CPU:0") and devices[1].endswith("CPU:1")
    single, mirrored = result["single_losses"], result["losses"]
    assert all(math.isfinite(value) for value in mirrored), mirrored
    assert mirrored[-1] < mirrored[0], mirrored
    for one, two in zip(single, mirrored):
        assert one == pytest.approx(two, rel=1e-4), (single, mirrored)
