"""torch: whole inference passes replayed as CUDA graphs (`PassGraphs`,
`PassGraph`).

On the CPU, with CUDA's capture and replay emulated (`EmulatedCuda`): a
signature's first call runs eagerly, its second captures, later ones
replay; outputs and Keras masks equal the eager pass's; outputs are
copies; signatures are bounded; a changed model (a replaced weight, LoRA,
int8, a dtype policy, `trainable`) is never replayed from a stale graph,
while a weight assigned in place is read by the replay; a pass a graph
cannot hold runs eagerly with one warning; every registered variant.
The registry-driven, changed-model, in-place-weight and through-the-model
tests run on recorded passes (the CPU's kind) as well.
On a GPU: the real graph of a tiny model equals its eager pass."""

import logging

import keras
import numpy as np
import pytest

import keras_attn
from keras_attn import keras_internals
from keras_attn import lora
from keras_attn.torch_runtime import graph_watch
from keras_attn.torch_runtime import pass_graph
from keras_attn.torch_runtime.direct_graph import DirectGraph
from tests.harness import to_numpy
from tests.models.test_variants import CONFIG as VARIANT_CONFIG
from tests.models.test_variants import REGISTERED
from tests.models.test_variants import VARIANT_FIELDS
from tests.torch_runtime.emulated_cuda import EmulatedCuda

pytestmark = [
    pytest.mark.skipif(
        keras.config.backend() != "torch", reason="CUDA graphs of inference passes are torch's"
    ),
    # `quantize("int8")` warns for each layer it leaves as it is.
    pytest.mark.filterwarnings("ignore:Layer .* does not have a `quantize` method"),
]

REAL_PASS_GRAPH = pass_graph.PassGraph
CONFIG = dict(
    vocab_size=40, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
    intermediate_size=32, max_position_embeddings=16, type_vocab_size=2,
)


class CpuPassGraph(EmulatedCuda, pass_graph.PassGraph):
    """`PassGraph` with CUDA emulated on the CPU; counts its replays."""

    made = []
    replays = 0

    def __init__(self, run, inputs):
        super().__init__(run, inputs)
        CpuPassGraph.made.append(self)

    def replay(self):
        CpuPassGraph.replays += 1
        super().replay()


@pytest.fixture(autouse=True)
def emulated(monkeypatch):
    """Every graph made is a `CpuPassGraph`."""
    monkeypatch.setattr(pass_graph, "PassGraph", CpuPassGraph)
    CpuPassGraph.made, CpuPassGraph.replays = [], 0
    yield monkeypatch
    CpuPassGraph.made, CpuPassGraph.replays = [], 0


def build(seed=0, **extra):
    keras.utils.set_random_seed(seed)
    return keras_attn.build_transformer_model(CONFIG, **extra)


@pytest.fixture(scope="module")
def encoder():
    return build()


@pytest.fixture(scope="module")
def masked_encoder():
    """An explicit `padding_mask` input, which becomes the outputs' mask."""
    return build(padding_mask_input=True)


def inputs_for(model, seed=0, batch=2, length=6):
    """Every input of `model` as a torch tensor, in `model.inputs` order:
    random ids, the last two positions of the first row padding (id 0 and
    a zero `padding_mask`)."""
    rng = np.random.default_rng(seed)
    values = {}
    for tensor in model.inputs:
        if tensor.name.endswith("padding_mask"):
            value = np.ones((batch, length), "int32")
        elif tensor.name.endswith("segment_ids"):
            value = np.repeat((np.arange(length) >= length // 2)[None], batch, 0).astype("int32")
        else:
            # Ids every vocabulary here holds (`test_variants`' has 30), none special.
            value = rng.integers(4, 30, size=(batch, length)).astype("int32")
        value[0, -2:] = 0
        values[tensor.name] = value
    return keras_internals.standardized_inputs(model, values)


def eager_pass(model):
    """`run` as the runner passes it: the model's direct eager pass."""
    graph = DirectGraph(model)
    return lambda inputs: graph(model, inputs)


def no_grad():
    import torch

    return torch.no_grad()


def flat(outputs):
    """(values, Keras mask or None) of every output."""
    masks = [keras_internals.keras_mask(x) for x in keras.tree.flatten(outputs)]
    return [
        (to_numpy(x), None if mask is None else to_numpy(mask))
        for x, mask in zip(keras.tree.flatten(outputs), masks)
    ]


def assert_equal_outputs(actual, expected):
    actual, expected = flat(actual), flat(expected)
    assert len(actual) == len(expected)
    for (value, mask), (expected_value, expected_mask) in zip(actual, expected):
        np.testing.assert_allclose(value, expected_value, rtol=1e-5, atol=1e-5)
        if expected_mask is None:
            assert mask is None
        else:
            np.testing.assert_array_equal(mask, expected_mask)


def test_on_gpu_and_capturable_now():
    import torch

    assert not pass_graph.on_gpu([torch.zeros(2)])
    assert not pass_graph.on_gpu([])
    assert not pass_graph.on_gpu([np.zeros(2)])
    assert pass_graph.capturable_now() is not torch.is_grad_enabled()
    with torch.no_grad():
        assert pass_graph.capturable_now()
    with torch.enable_grad():
        assert not pass_graph.capturable_now()


@pytest.mark.parametrize("which", ["encoder", "masked_encoder"])
def test_first_call_eager_second_captures_then_replays_equal_to_the_eager_pass(which, request):
    model = request.getfixturevalue(which)
    run, graphs = eager_pass(model), pass_graph.PassGraphs()
    first, second = inputs_for(model, seed=1), inputs_for(model, seed=2)
    with no_grad():
        expected = [run(first), run(second)]
        assert_equal_outputs(graphs(model, run, first), expected[0])
        assert (len(CpuPassGraph.made), CpuPassGraph.replays) == (0, 0)
        assert_equal_outputs(graphs(model, run, first), expected[0])
        assert (len(CpuPassGraph.made), CpuPassGraph.replays) == (1, 1)
        # Other values of the same signature: copied into the graph's buffers.
        assert_equal_outputs(graphs(model, run, second), expected[1])
        assert_equal_outputs(graphs(model, run, first), expected[0])
        assert (len(CpuPassGraph.made), CpuPassGraph.replays) == (1, 3)
    # The padding is the Keras mask of the outputs, replayed as well.
    (_, mask), = flat(expected[0])
    assert mask is not None and not mask.all()
    assert "1 of at most 8 input signatures captured (1 captures, 3 replays)" in graphs.describe()


def test_outputs_are_copies_and_buffers_passed_back_are_not_copied(encoder):
    run, graphs = eager_pass(encoder), pass_graph.PassGraphs()
    first, second = inputs_for(encoder, seed=1), inputs_for(encoder, seed=2)
    with no_grad():
        expected = run(first)
        graphs(encoder, run, first)
        kept = graphs(encoder, run, first)
        graphs(encoder, run, second)
        assert_equal_outputs(kept, expected)  # not overwritten by the next replay
        (graph,) = CpuPassGraph.made
        assert kept is not graph.buffers[0]
        versions = [buffer._version for buffer in graph.inputs]
        assert_equal_outputs(graphs(encoder, run, list(graph.inputs)), run(second))
        assert [buffer._version for buffer in graph.inputs] == versions


def test_signatures_are_bounded_least_recently_used_first(encoder):
    run, graphs = eager_pass(encoder), pass_graph.PassGraphs(limit=2)
    by_length = {length: inputs_for(encoder, length=length) for length in (4, 5, 6)}
    with no_grad():
        for length in (4, 5, 4, 5):
            graphs(encoder, run, by_length[length])
        assert len(CpuPassGraph.made) == 2
        graphs(encoder, run, by_length[4])  # 4 is now the most recently used
        graphs(encoder, run, by_length[6])
        graphs(encoder, run, by_length[6])  # captures 6, evicts 5
        assert len(CpuPassGraph.made) == 3
        graphs(encoder, run, by_length[4])
        assert len(CpuPassGraph.made) == 3
        expected = run(by_length[5])
        assert_equal_outputs(graphs(encoder, run, by_length[5]), expected)  # captured again
        assert len(CpuPassGraph.made) == 4
    assert "2 of at most 2 input signatures" in graphs.describe()
    with pytest.raises(ValueError, match="limit=0"):
        pass_graph.PassGraphs(limit=0)


# Both kinds of replayed pass: CUDA graphs (emulated) and, on the CPU,
# recorded passes (tests/torch_runtime/test_recorded_pass.py).
KINDS = sorted(pass_graph.KINDS)


@pytest.mark.parametrize("kind", KINDS)
def test_a_weight_assigned_in_place_is_read_by_the_replay(kind):
    model = build(seed=3)
    run, graphs = eager_pass(model), pass_graph.PassGraphs(kind=kind)
    inputs = inputs_for(model)
    with no_grad():
        graphs(model, run, inputs)
        graphs(model, run, inputs)
        kernel = model.get_layer("Transformer-0-FeedForward").weights[0]
        kernel.assign(to_numpy(kernel) * 2)
        expected = run(inputs)
        assert_equal_outputs(graphs(model, run, inputs), expected)
    assert (graphs.captures, graphs.replays) == (1, 2)


def replace_a_weight(model):
    kernel = model.get_layer("Transformer-0-FeedForward").weights[0]
    kernel.value.data = kernel.value.data * 2  # another tensor, as `module.to(...)` makes


def add_adapters(model):
    lora.enable_lora(model, 2, feed_forward=True)
    for variable in model.trainable_weights:  # adapters start at zero: make them count
        variable.assign(np.random.default_rng(2).normal(size=variable.shape) * 0.1)


def mixed_precision(model):
    for layer in [model, *keras_internals.all_layers(model)]:
        layer.dtype_policy = "mixed_bfloat16"


def freeze(model):
    model.trainable = False


CHANGES = {
    "replaced weight": replace_a_weight,
    "lora": add_adapters,
    "lora merged": lora.merge_lora,
    "int8": lambda model: model.quantize("int8"),
    "dtype policy": mixed_precision,
    "trainable": freeze,
}
# What a change needs of the model before its graph is captured.
PREPARE = {"lora merged": add_adapters}
# Changes after which the model computes what it computed (to rounding).
SAME_NUMBERS = {"lora merged", "trainable"}


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("change", sorted(CHANGES))
def test_a_changed_model_is_never_replayed_from_a_stale_graph(change, kind):
    """After the change the next call runs eagerly (no replay), the one
    after captures the changed model: both give its eager pass."""
    model = build(seed=4)
    PREPARE.get(change, lambda model: None)(model)
    run, graphs = eager_pass(model), pass_graph.PassGraphs(kind=kind)
    inputs = inputs_for(model)
    with no_grad():
        graphs(model, run, inputs)
        graphs(model, run, inputs)
        before = run(inputs)
        CHANGES[change](model)
        expected = run(inputs)
        if change not in SAME_NUMBERS:
            assert not np.allclose(to_numpy(expected), to_numpy(before), atol=1e-5)
        assert_equal_outputs(graphs(model, run, inputs), expected)
        assert (graphs.captures, graphs.replays) == (1, 1)
        assert_equal_outputs(graphs(model, run, inputs), expected)
        assert_equal_outputs(graphs(model, run, inputs), expected)
        assert (graphs.captures, graphs.replays) == (2, 3)


class RefusedCapture(CpuPassGraph):
    def capture(self, run):
        raise RuntimeError("operation not permitted when stream is capturing")


def test_a_refused_capture_warns_once_and_runs_eagerly(encoder, emulated, caplog):
    emulated.setattr(pass_graph, "PassGraph", RefusedCapture)
    run, graphs = eager_pass(encoder), pass_graph.PassGraphs()
    inputs = inputs_for(encoder)
    with no_grad(), caplog.at_level(logging.WARNING, logger="keras_attn"):
        expected = run(inputs)
        for _ in range(4):
            assert_equal_outputs(graphs(encoder, run, inputs), expected)
    (record,) = caplog.records
    assert "operation not permitted when stream is capturing" in record.getMessage()
    assert CpuPassGraph.replays == 0
    assert graphs.describe().startswith("inference CUDA graphs off for this model: RuntimeError")


def test_an_output_that_is_not_a_tensor_is_refused(encoder, caplog):
    direct = eager_pass(encoder)

    def run(inputs):
        return {"sequence": direct(inputs), "count": 3}

    graphs = pass_graph.PassGraphs()
    inputs = inputs_for(encoder)
    with no_grad(), caplog.at_level(logging.WARNING, logger="keras_attn"):
        for _ in range(3):
            assert graphs(encoder, run, inputs)["count"] == 3
    assert len(caplog.records) == 1
    assert "an output is int, not a CUDA tensor" in graphs.describe()


def test_python_numbers_become_fill_kernels_and_host_reads_are_refused(encoder, emulated, caplog):
    """The warm-up and the capture run under a `GraphWatch`: a number the
    pass makes a tensor of (`not_equal(x, 0.0)`, as a padding mask is
    computed) is built on the device, where a real capture could not copy
    it from the host; a value read on the host refuses the graph, naming
    the line."""
    direct, filled = eager_pass(encoder), []
    real_filled = graph_watch._filled
    emulated.setattr(graph_watch, "_filled", lambda *args: filled.append(args) or real_filled(*args))

    def nonzero(inputs):
        return keras.ops.not_equal(direct(inputs), 0.0)

    graphs, inputs = pass_graph.PassGraphs(), inputs_for(encoder)
    with no_grad():
        expected = nonzero(inputs)
        assert filled == []
        for _ in range(3):
            np.testing.assert_array_equal(to_numpy(graphs(encoder, nonzero, inputs)), to_numpy(expected))
    assert (len(CpuPassGraph.made), CpuPassGraph.replays) == (1, 2), graphs.describe()
    # The warm-up's and the capture's, the encoder's own numbers (its
    # padding mask's 0) among them.
    numbers = [args[0] for args in filled]
    assert len(numbers) % 2 == 0 and numbers[:len(numbers) // 2] == numbers[len(numbers) // 2:]
    assert [number for number in numbers if isinstance(number, float)] == [0.0, 0.0]

    def scaled_by_a_host_number(inputs):
        outputs = direct(inputs)
        return outputs * outputs.abs().max().item()

    graphs = pass_graph.PassGraphs()
    with no_grad(), caplog.at_level(logging.WARNING, logger="keras_attn"):
        for _ in range(3):
            graphs(encoder, scaled_by_a_host_number, inputs)
    assert len(CpuPassGraph.made) == 1 and CpuPassGraph.replays == 2
    assert "reads a tensor's value on the host (Tensor.item)" in graphs.describe()
    assert "test_pass_graph.py" in graphs.describe()
    assert len(caplog.records) == 1


def test_with_autograd_on_every_call_runs_eagerly(encoder):
    run, graphs = eager_pass(encoder), pass_graph.PassGraphs()
    inputs = inputs_for(encoder)
    for _ in range(3):
        outputs = graphs(encoder, run, inputs)
    assert outputs.requires_grad
    assert CpuPassGraph.made == []


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("variant", sorted(REGISTERED))
def test_every_variant_replays_its_eager_pass(variant, kind):
    keras.utils.set_random_seed(0)
    config = dict(VARIANT_CONFIG, **VARIANT_FIELDS.get(variant, {}))
    model = keras_attn.build_transformer_model(
        config, variant=variant, application=REGISTERED[variant].applications[0]
    )
    run, graphs = eager_pass(model), pass_graph.PassGraphs(kind=kind)
    first, second = inputs_for(model, seed=1), inputs_for(model, seed=2)
    with no_grad():
        expected = graphs(model, run, first)  # a signature's first call: `run` itself
        graphs(model, run, second)  # captured with other values
        assert_equal_outputs(graphs(model, run, first), expected)
    assert (graphs.captures, graphs.replays, graphs.refused) == (1, 2, None), graphs.describe()


# Through the model ------------------------------------------------------------


@pytest.fixture
def graphs_on(emulated):
    """The runner takes the graph path for any inputs, graphs emulated."""
    pytest.importorskip("keras_attn.torch_runtime.runner")
    emulated.setattr(pass_graph, "on_gpu", lambda inputs: True)
    emulated.setenv("KERAS_ATTN_TORCH_CUDA_GRAPHS", "1")
    return emulated


@pytest.mark.parametrize("kind", KINDS)
def test_model_calls_under_no_grad_and_predict_replay(kind, request):
    if kind == "cuda":
        request.getfixturevalue("graphs_on")
    model = build(seed=5)
    inputs = inputs_for(model)
    with no_grad():
        expected = eager_pass(model)(inputs)
        for _ in range(3):
            assert_equal_outputs(model(inputs), expected)
    graphs = {"cuda": model._runner.pass_graphs, "recorded": model._runner.recorded_passes}[kind]
    assert (graphs.captures, graphs.replays) == (1, 2)
    # Autograd on: the eager pass, whose outputs can be differentiated.
    assert model(inputs).requires_grad
    assert (graphs.captures, graphs.replays) == (1, 2)
    data = [to_numpy(value) for value in inputs]
    for _ in range(2):
        predicted = model.predict(data, batch_size=2, verbose=0)
        np.testing.assert_allclose(predicted, to_numpy(expected), rtol=1e-5, atol=1e-5)
    assert graphs.replays >= 3


# On a GPU ---------------------------------------------------------------------


def cuda_available():
    import torch

    return torch.cuda.is_available()


@pytest.mark.skipif(keras.config.backend() != "torch" or not cuda_available(), reason="needs a GPU")
def test_real_cuda_graphs_replay_the_eager_pass(emulated):
    import torch

    emulated.setattr(pass_graph, "PassGraph", REAL_PASS_GRAPH)
    model = build(seed=6, padding_mask_input=True)
    run, graphs = eager_pass(model), pass_graph.PassGraphs()
    inputs = [value.cuda() for value in inputs_for(model, seed=1)]
    other = [value.cuda() for value in inputs_for(model, seed=2)]
    assert pass_graph.on_gpu(inputs)
    with torch.no_grad():
        expected = [run(inputs), run(other)]
        kept = [graphs(model, run, inputs) for _ in range(3)]
        assert_equal_outputs(graphs(model, run, other), expected[1])
    for outputs in kept:
        assert_equal_outputs(outputs, expected[0])
    assert (graphs.captures, graphs.replays) == (1, 3), graphs.describe()
