"""keras_attn's AdamW against AdamW written in numpy, with and without
amsgrad, weight decay exclusions and a schedule; on torch its update is the
fused kernel (counted), inside `torch.compile` it is Keras' own; it
serialises as itself and trains a model as Keras' AdamW does."""

import keras
import numpy as np
import pytest

import keras_attn
from keras_attn.optimizers import AdamW
from keras_attn.optimizers import PiecewiseLinearSchedule
from tests.harness import to_numpy

BACKEND = keras.config.backend()
SHAPES = [(3, 4), (4,), (2, 5, 3)]


def numpy_adamw(weights, gradients, learning_rates, beta_1=0.9, beta_2=0.999, epsilon=1e-7,
                weight_decay=0.004, amsgrad=False, decayed=None):
    """Keras' AdamW, step by step, in float64: decay, moments, step."""
    weights = [w.astype("float64") for w in weights]
    m = [np.zeros_like(w) for w in weights]
    v = [np.zeros_like(w) for w in weights]
    v_hat = [np.zeros_like(w) for w in weights]
    decayed = decayed or [True] * len(weights)
    for t, (step_gradients, rate) in enumerate(zip(gradients, learning_rates), start=1):
        for i, g in enumerate(step_gradients):
            if decayed[i]:
                weights[i] = weights[i] * (1 - weight_decay * rate)
            m[i] = beta_1 * m[i] + (1 - beta_1) * g
            v[i] = beta_2 * v[i] + (1 - beta_2) * g * g
            v_hat[i] = np.maximum(v_hat[i], v[i])
            alpha = rate * np.sqrt(1 - beta_2**t) / (1 - beta_1**t)
            weights[i] = weights[i] - alpha * m[i] / (np.sqrt(v_hat[i] if amsgrad else v[i]) + epsilon)
    return weights


def run(optimizer, weights, gradients):
    variables = [keras.Variable(w, name=f"w{i}") for i, w in enumerate(weights)]
    for step_gradients in gradients:
        optimizer.apply([keras.ops.convert_to_tensor(g) for g in step_gradients], variables)
    return [to_numpy(v) for v in variables]


def problem(steps=6, seed=0):
    rng = np.random.default_rng(seed)
    weights = [rng.normal(size=shape).astype("float32") for shape in SHAPES]
    gradients = [[rng.normal(size=shape).astype("float32") for shape in SHAPES] for _ in range(steps)]
    return weights, gradients


@pytest.fixture
def fused_calls(monkeypatch):
    """How many times torch's fused AdamW kernel ran (torch only)."""
    if BACKEND != "torch":
        return None
    import torch

    calls = []
    kernel = torch._fused_adamw_

    def counted(*args, **kwargs):
        calls.append(1)
        return kernel(*args, **kwargs)

    monkeypatch.setattr(torch, "_fused_adamw_", counted)
    return calls


@pytest.mark.parametrize("amsgrad", [False, True], ids=["adam", "amsgrad"])
def test_updates_equal_numpy_adamw(amsgrad, fused_calls):
    weights, gradients = problem()
    optimizer = AdamW(learning_rate=0.01, weight_decay=0.05, amsgrad=amsgrad, epsilon=1e-3)
    actual = run(optimizer, weights, gradients)
    expected = numpy_adamw(weights, gradients, [0.01] * len(gradients), epsilon=1e-3,
                           weight_decay=0.05, amsgrad=amsgrad)
    for a, e in zip(actual, expected):
        np.testing.assert_allclose(a, e, rtol=1e-5, atol=1e-6)
    # The update moved the weights by more than the tolerance.
    assert max(np.abs(a - w).max() for a, w in zip(actual, weights)) > 1e-2
    if fused_calls is not None:
        assert len(fused_calls) == len(gradients)


def test_schedule_and_weight_decay_exclusions_follow_keras():
    """A learning-rate schedule read per step, and a variable excluded from
    weight decay by name, as `keras.optimizers.AdamW` does."""
    weights, gradients = problem(steps=5, seed=1)
    schedule = PiecewiseLinearSchedule(0.02, {2: 1.0, 4: 0.5})
    optimizer = AdamW(learning_rate=schedule, weight_decay=0.1)
    optimizer.exclude_from_weight_decay(var_names=["w1"])
    actual = run(optimizer, weights, gradients)
    rates = [float(to_numpy(schedule(step))) for step in range(len(gradients))]
    expected = numpy_adamw(weights, gradients, rates, weight_decay=0.1, decayed=[True, False, True])
    for a, e in zip(actual, expected):
        np.testing.assert_allclose(a, e, rtol=1e-5, atol=1e-6)


def test_serialises_as_itself():
    optimizer = AdamW(learning_rate=0.003, weight_decay=0.02, beta_2=0.98)
    restored = keras.optimizers.deserialize(keras.optimizers.serialize(optimizer))
    assert type(restored) is AdamW
    assert restored.get_config() == optimizer.get_config()


def test_trains_a_model_as_keras_adamw_does():
    """Two identical models, two optimizers, three `train_on_batch` steps:
    the same weights (Keras' AdamW is the reference on every backend)."""
    config = dict(vocab_size=30, hidden_size=8, num_hidden_layers=1, num_attention_heads=2,
                  intermediate_size=16, hidden_dropout_prob=0.0,
                  attention_probs_dropout_prob=0.0)
    rng = np.random.default_rng(0)
    tokens = rng.integers(1, 30, (2, 6)).astype("int32")
    data = {"token_ids": tokens, "segment_ids": np.zeros_like(tokens)}
    target = rng.normal(size=(2, 6, 8)).astype("float32")
    results = []
    for optimizer in (keras.optimizers.AdamW(0.01), AdamW(0.01)):
        keras.utils.set_random_seed(3)
        model = keras_attn.build_transformer_model(config)
        model.compile(optimizer=optimizer, loss="mse")
        for _ in range(3):
            model.train_on_batch(data, target)
        results.append([to_numpy(w) for w in model.weights])
    # float32 rounding differs (torch's kernel orders the step differently);
    # a wrong step would differ by about the learning rate, 1e-2.
    for ours, theirs in zip(*results):
        np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-5)


@pytest.mark.skipif(BACKEND != "torch", reason="torch.compile is torch's")
def test_inside_torch_compile_it_is_keras_update(fused_calls):
    """A `jit_compile=True` train step traces Keras' own update (inductor
    fuses it), not the fused kernel, whose arguments are Python numbers."""
    weights, gradients = problem(steps=3, seed=2)
    optimizer = AdamW(learning_rate=0.01)
    variables = [keras.Variable(w) for w in weights]
    optimizer.build(variables)

    import torch

    @torch.compile(backend="eager", fullgraph=False)
    def apply(grads):
        optimizer.apply(grads, variables)

    for step_gradients in gradients:
        apply([keras.ops.convert_to_tensor(g) for g in step_gradients])
    expected = numpy_adamw(weights, gradients, [0.01] * 3)
    for a, e in zip([to_numpy(v) for v in variables], expected):
        np.testing.assert_allclose(a, e, rtol=1e-5, atol=1e-6)
    assert fused_calls == []


def test_gradient_accumulation_and_clipping_are_keras_own():
    """Keras accumulates and clips before the update this class replaces:
    the weights equal `keras.optimizers.AdamW`'s with the same options."""
    weights, gradients = problem(steps=6, seed=4)
    options = dict(learning_rate=0.01, weight_decay=0.01, gradient_accumulation_steps=2,
                   global_clipnorm=1.0)
    ours = run(AdamW(**options), weights, gradients)
    theirs = run(keras.optimizers.AdamW(**options), weights, gradients)
    for a, b, w in zip(ours, theirs, weights):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    assert max(np.abs(a - w).max() for a, w in zip(ours, weights)) > 1e-3
