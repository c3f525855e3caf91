"""The torch full pass without Keras' per-layer `__call__`
(`keras_attn.torch_runtime.direct_graph.DirectGraph`, issue 30): the same outputs,
Keras masks, dropout and gradients as Keras' own `Functional.call`, with
`Layer.__call__` left for the few layers that need it."""

import keras
import numpy as np
import pytest

import keras_attn
from tests.harness import to_numpy

pytestmark = pytest.mark.skipif(
    keras.config.backend() != "torch", reason="the direct pass is torch's eager pass"
)

CONFIG = dict(
    vocab_size=60, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
    intermediate_size=24, max_position_embeddings=32, type_vocab_size=2,
)
# (variant, application, extra builder arguments): an encoder with its
# masked-LM head, a causal LM, UniLM's mask, an encoder-decoder, rotary
# positions and an explicit padding mask input.
SETUPS = [
    ("bert", "encoder", {}),
    ("bert", "mlm", {}),
    ("gpt2", "lm", {}),
    ("roformer", "unilm", {}),
    ("t5", "seq2seq", {}),
    ("bert", "encoder", {"padding_mask_input": True}),
]


def inputs_for(model, seed=0, batch=2, length=7):
    """Random ids for every input of `model`, the last two positions of the
    first row padding (id 0, or a zero `padding_mask`)."""
    rng = np.random.default_rng(seed)
    inputs = {}
    for tensor in model.inputs:
        name = tensor.name
        if name.endswith("padding_mask"):
            values = np.ones((batch, length), "int32")
            values[0, -2:] = 0
        elif name.endswith("segment_ids"):
            values = (rng.integers(0, 2, size=(batch, length)) * (np.arange(length) > 2)).astype("int32")
        else:
            values = rng.integers(1, CONFIG["vocab_size"], size=(batch, length)).astype("int32")
            values[0, -2:] = 0
        inputs[name] = values
    return inputs


def build(variant, application, extra, dropout_rate=0.0):
    return keras_attn.build_transformer_model(
        CONFIG, variant=variant, application=application, dropout_rate=dropout_rate, **extra
    )


@pytest.fixture(scope="module", params=SETUPS, ids=lambda setup: f"{setup[0]}-{setup[1]}")
def model(request):
    return build(*request.param)


class CountingCalls:
    """Counts `keras.layers.Layer.__call__` calls while active."""

    def __init__(self, monkeypatch):
        self.count = 0
        original = keras.layers.Layer.__call__

        def counted(layer, *args, **kwargs):
            self.count += 1
            return original(layer, *args, **kwargs)

        monkeypatch.setattr(keras.layers.Layer, "__call__", counted)


def flat_outputs(outputs):
    return [(to_numpy(x), None if getattr(x, "_keras_mask", None) is None else to_numpy(x._keras_mask))
            for x in keras.tree.flatten(outputs)]


def assert_same(direct, reference):
    assert len(direct) == len(reference)
    for (value, mask), (expected, expected_mask) in zip(direct, reference):
        np.testing.assert_array_equal(value, expected)
        if expected_mask is None:
            assert mask is None
        else:
            np.testing.assert_array_equal(mask, expected_mask)


def test_the_direct_pass_equals_the_keras_pass_outputs_and_masks(model, monkeypatch):
    inputs = inputs_for(model)
    calls = CountingCalls(monkeypatch)
    direct = flat_outputs(model(inputs))
    direct_calls = calls.count
    monkeypatch.setenv("KERAS_ATTN_DIRECT_PASS", "0")  # Keras' own pass
    calls.count = 0
    reference = flat_outputs(model(inputs))
    assert_same(direct, reference)
    # Keras' pass runs every layer of the graph through `__call__`; the
    # direct one only the model itself.
    assert direct_calls == 1
    assert calls.count >= len(model.layers) - len(model.inputs) > 10
    # The padding is the Keras mask of the sequence outputs (an
    # encoder-decoder's decoder ids have no padding id: its start id is 0).
    if model.application != "seq2seq":
        assert any(mask is not None and not mask.all() for _, mask in direct)


def test_training_pass_draws_the_same_dropout_and_gradients(monkeypatch):
    import torch

    model = build("bert", "mlm", {}, dropout_rate=0.3)
    inputs = inputs_for(model)
    # Dropout draws from each layer's seed generator, whose state is a
    # non-trainable variable, and torch's attention dropout from torch's
    # generator: both passes start from the same states.
    state = [to_numpy(v) for v in model.non_trainable_variables]

    def run():
        torch.manual_seed(0)
        for variable, value in zip(model.non_trainable_variables, state):
            variable.assign(value)
        for variable in model.trainable_variables:
            variable.value.grad = None
        output = model(inputs, training=True)
        loss = (output * torch.linspace(-1, 1, output.shape[-1])).sum()
        loss.backward()
        return to_numpy(output), [to_numpy(v.value.grad) for v in model.trainable_variables]

    output, gradients = run()
    monkeypatch.setenv("KERAS_ATTN_DIRECT_PASS", "0")  # Keras' own pass
    expected, expected_gradients = run()
    np.testing.assert_array_equal(output, expected)
    for gradient, expected_gradient in zip(gradients, expected_gradients):
        np.testing.assert_array_equal(gradient, expected_gradient)
    # Dropout was on: the eval pass differs.
    assert not np.allclose(to_numpy(model(inputs)), output)


def test_quantized_and_mixed_precision_layers_compute_as_through_keras(monkeypatch):
    """int8 layers are computed by their `quantized_call`; under a mixed
    policy every layer goes through `__call__` (it casts)."""
    quantized = build("bert", "mlm", {})
    quantized.quantize("int8")
    keras.config.set_dtype_policy("mixed_bfloat16")
    try:
        mixed = build("bert", "mlm", {})
    finally:
        keras.config.set_dtype_policy("float32")
    direct = {name: flat_outputs(m(inputs_for(m))) for name, m in (("int8", quantized), ("mixed", mixed))}
    monkeypatch.setenv("KERAS_ATTN_DIRECT_PASS", "0")  # Keras' own pass
    for name, m in (("int8", quantized), ("mixed", mixed)):
        assert_same(direct[name], flat_outputs(m(inputs_for(m))))


def test_a_torch_hook_on_a_layer_still_runs():
    model = build("bert", "encoder", {})
    layer = model.get_layer("Transformer-0-FeedForward")
    seen = []
    handle = layer.register_forward_hook(lambda module, args, output: seen.append(output.shape))
    try:
        model(inputs_for(model))
    finally:
        handle.remove()
    assert seen == [(2, 7, CONFIG["hidden_size"])]
