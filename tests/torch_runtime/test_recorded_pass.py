"""torch on the CPU: inference passes recorded as their operations and
replayed (`RecordedPass`, `PassGraphs(kind="recorded")`).

Keras masks are replayed; what a replay would get wrong is refused by name (a host read, a write into a tensor the
pass did not make, an alias made without an operation); computations
merged or dropped only where that changes nothing (a value written through
a view between two equal reads, random draws nobody uses).
tests/torch_runtime/test_pass_graph.py runs its registry-driven,
changed-model, in-place-weight and through-the-model tests on both kinds
of replayed pass."""

import logging

import keras
import pytest

from keras_attn.torch_runtime import pass_graph
from keras_attn.torch_runtime.cuda_graph import NotCapturable
from tests.harness import to_numpy
from tests.torch_runtime.test_pass_graph import assert_equal_outputs
from tests.torch_runtime.test_pass_graph import build
from tests.torch_runtime.test_pass_graph import eager_pass
from tests.torch_runtime.test_pass_graph import inputs_for
from tests.torch_runtime.test_pass_graph import no_grad

pytestmark = [
    pytest.mark.skipif(keras.config.backend() != "torch", reason="recorded passes are torch's"),
    pytest.mark.filterwarnings("ignore:Layer .* does not have a `quantize` method"),
]


def recorded():
    from keras_attn.torch_runtime.recorded_pass import RecordedPass

    return RecordedPass


@pytest.fixture(scope="module")
def masked_encoder():
    return build(padding_mask_input=True)


def passes():
    return pass_graph.PassGraphs(kind="recorded")


def test_keras_masks_are_replayed_and_outputs_are_fresh(masked_encoder):
    run, graphs = eager_pass(masked_encoder), passes()
    first, second = inputs_for(masked_encoder, seed=1), inputs_for(masked_encoder, seed=2)
    with no_grad():
        expected = [run(first), run(second)]
        graphs(masked_encoder, run, first)
        kept = graphs(masked_encoder, run, first)
        assert_equal_outputs(graphs(masked_encoder, run, second), expected[1])
    assert_equal_outputs(kept, expected[0])
    mask = to_numpy(kept._keras_mask)
    assert not mask.all() and mask.any()
    (recording,) = graphs.graphs.values()
    assert isinstance(recording, recorded())
    # Each layer's own mask computations are computed once for the pass.
    assert recording.operations < len(recording.source.splitlines())


def test_a_host_read_is_refused_by_name_once_and_the_pass_runs_eagerly(caplog):
    model = build(seed=5)
    direct = eager_pass(model)

    def scaled_by_a_host_number(inputs):
        outputs = direct(inputs)
        return outputs * outputs.abs().max().item()

    graphs, inputs, other = passes(), inputs_for(model, seed=1), inputs_for(model, seed=2)
    with no_grad(), caplog.at_level(logging.WARNING, logger="keras_attn"):
        for values in (inputs, inputs, other, inputs):
            assert_equal_outputs(graphs(model, scaled_by_a_host_number, values),
                                 scaled_by_a_host_number(values))
    assert graphs.replays == 0 and len(caplog.records) == 1
    assert "reads a tensor's value on the host (Tensor.item)" in graphs.describe()
    assert "test_recorded_pass.py" in graphs.describe()


def test_writes_into_tensors_the_pass_did_not_make_and_hidden_aliases_are_refused():
    import torch

    counter = torch.zeros(())

    def counting(inputs):
        counter.add_(1)
        return inputs[0] * counter

    def through_numpy(inputs):
        return torch.from_numpy(inputs[0].numpy()) * 2

    inputs = [torch.ones(2, 3)]
    with no_grad():
        with pytest.raises(NotCapturable, match="writes in place into a tensor it did not make"):
            recorded()(counting, inputs)
        with pytest.raises(NotCapturable, match="an alias no torch operation made") as refused:
            recorded()(through_numpy, inputs)
        assert "(Tensor.numpy) at " in str(refused.value)
        # `.data` is an operation (an alias): recorded, and read at each replay.
        recording = recorded()(lambda inputs: inputs[0].data * 2, inputs)
        torch.testing.assert_close(recording([torch.full((2, 3), 5.0)]), torch.full((2, 3), 10.0))
        with pytest.raises(NotCapturable, match="an output is int, not a tensor"):
            recorded()(lambda inputs: [inputs[0] + 1, 3], inputs)


def test_equal_computations_merge_only_where_nothing_is_written_between():
    import torch

    def run(inputs):
        y = inputs[0] * 2
        first = y.sum(0)
        y.view(-1).add_(1)  # `y` itself is not an argument: only its version changes
        second = y.sum(0)
        third = inputs[0].abs() + inputs[0].abs()  # the same value twice: one abs
        return first, second, third

    x, other = torch.randn(3, 4), torch.randn(3, 4)
    with no_grad():
        recording = recorded()(run, [x])
        for values in ([x], [other]):
            for actual, expected in zip(recording(values), run(values)):
                torch.testing.assert_close(actual, expected, rtol=0, atol=0)
    assert recording.operations == 7  # mul, sum, view, add_, sum, abs, add


def test_random_draws_are_kept_drawn_at_each_replay_in_order():
    import torch

    def run(inputs):
        torch.rand_like(inputs[0])  # unused, but it moves the generator
        return inputs[0] + torch.rand_like(inputs[0])

    x = torch.zeros(2, 3)
    with no_grad():
        recording = recorded()(run, [x])
        torch.manual_seed(7)
        expected = run([x])
        torch.manual_seed(7)
        torch.testing.assert_close(recording([x]), expected, rtol=0, atol=0)
        assert not torch.equal(recording([x]), recording([x]))


def test_a_constant_output_is_returned_as_a_copy():
    import torch

    table = torch.arange(6.0)

    def run(inputs):
        return inputs[0] + 1, table

    with no_grad():
        recording = recorded()(run, [torch.zeros(2)])
        _, returned = recording([torch.zeros(2)])
        returned.add_(100)
        torch.testing.assert_close(recording([torch.zeros(2)])[1], torch.arange(6.0))
    assert torch.equal(table, torch.arange(6.0))


@pytest.mark.parametrize("threads", [1, 2])
def test_a_product_of_few_rows_goes_to_onednn_only_with_threads(threads):
    """A product of 8 rows by a 1024 x 512 matrix, with two torch threads, is
    recorded as oneDNN's (`few_row_product_op`): replayed and compiled by
    `torch.compile`, it is the float64 product to float32 rounding. With one
    thread it stays `aten.mm`, whose replay is the eager product to the
    bit."""
    import numpy as np
    import torch

    from keras_attn.torch_runtime import recorded_pass

    if threads > 1 and not torch.backends.mkldnn.is_available():
        pytest.skip("torch is built without oneDNN")
    generator = torch.Generator().manual_seed(0)
    weight = torch.randn(1024, 512, generator=generator) / 32  # products of about 1
    left, other = (torch.randn(8, 1024, generator=generator) for _ in range(2))
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        with no_grad():
            recording = recorded()(lambda inputs: torch.tanh(inputs[0] @ weight), [left])
            replayed = recording([other])
            # inductor calls the custom operation as it is (its own lowering
            # of oneDNN's linear fails); `mm` needs no such check.
            compiled = (torch.compile(recording.function, fullgraph=True)(other)[0]
                        if threads > 1 else replayed)
            eager = torch.tanh(other @ weight)
    finally:
        torch.set_num_threads(before)
    functions = list(recording.function.__globals__.values())
    onednn = any(f is recorded_pass.few_row_product_op() for f in functions)
    assert onednn == (threads > 1)
    assert any(f is torch.ops.aten.mm.default for f in functions) == (threads == 1)
    expected = np.tanh(other.double().numpy() @ weight.double().numpy())
    np.testing.assert_allclose(replayed.numpy(), expected, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(compiled.numpy(), expected, rtol=1e-5, atol=1e-5)
    if not onednn:
        assert torch.equal(replayed, eager)
