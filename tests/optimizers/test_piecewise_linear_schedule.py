"""PiecewiseLinearSchedule against numpy's interpolation, alone and inside
a compiled, saved optimizer."""

import keras
import numpy as np
import pytest

from keras_attn.optimizers import PiecewiseLinearSchedule
from tests.harness import supports_jit, to_numpy


def numpy_rate(learning_rate, schedule, steps):
    points = dict(schedule)
    points.setdefault(0, 0.0)  # bert4keras's from_zero
    steps_sorted = sorted(points)
    return learning_rate * np.interp(steps, steps_sorted, [points[s] for s in steps_sorted])


@pytest.mark.parametrize(
    "schedule",
    [{1000: 1.0, 2000: 0.1}, {0: 0.5, 10: 2.0, 11: 0.0, 30: 1.0}, {7: 3.0}],
    ids=["warmup_decay", "from_step_0", "one_point"],
)
def test_schedule_equals_numpy_interpolation(schedule):
    rate = PiecewiseLinearSchedule(0.01, schedule)
    last = max(schedule)
    steps = sorted(set(range(0, last + 5)) | set(np.random.default_rng(0).integers(0, 3 * last, 50).tolist()))
    if last > 100:
        steps = sorted(set(steps[::37]) | {0, 1, 999, 1000, 1001, 1500, 2000, 2001, 5000})
    actual = np.array([float(to_numpy(rate(step))) for step in steps])
    np.testing.assert_allclose(actual, numpy_rate(0.01, schedule, np.array(steps)), rtol=1e-6, atol=1e-12)


def test_schedule_in_a_compiled_optimizer_survives_keras_saving(tmp_path):
    schedule = {4: 1.0, 8: 0.25}
    inputs = keras.Input((3,))
    model = keras.Model(inputs, keras.layers.Dense(1)(inputs))
    model.compile(
        optimizer=keras.optimizers.SGD(PiecewiseLinearSchedule(0.1, schedule)),
        loss="mse",
        jit_compile=supports_jit(),
    )
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=(6, 3)).astype("float32"), rng.normal(size=(6, 1)).astype("float32")
    for step in range(6):
        # Each step's update is the schedule's rate at that step times the gradient.
        before = to_numpy(model.layers[1].kernel).copy()
        error = x @ before + to_numpy(model.layers[1].bias) - y
        gradient = 2 * x.T @ error / len(x)
        model.train_on_batch(x, y)
        expected = before - numpy_rate(0.1, schedule, step) * gradient
        np.testing.assert_allclose(to_numpy(model.layers[1].kernel), expected, rtol=1e-4, atol=1e-6)
    path = str(tmp_path / "scheduled.keras")
    model.save(path)
    restored = keras.models.load_model(path)
    learning_rate = restored.optimizer._learning_rate
    assert isinstance(learning_rate, PiecewiseLinearSchedule)
    assert learning_rate.get_config() == {"learning_rate": 0.1, "schedule": {4: 1.0, 8: 0.25}}
    assert int(to_numpy(restored.optimizer.iterations)) == 6
    np.testing.assert_allclose(
        float(to_numpy(restored.optimizer.learning_rate)), numpy_rate(0.1, schedule, 6), rtol=1e-6
    )


@pytest.mark.parametrize(
    "learning_rate, schedule, message",
    [
        (0.0, {1: 1.0}, "`learning_rate` must be a positive number; received 0.0"),
        (0.1, {}, "`schedule` must be a non-empty dict"),
        (0.1, {-5: 1.0}, "integer >= 0; received the step -5"),
        (0.1, {2.5: 1.0}, "integer >= 0; received the step 2.5"),
        (0.1, {10: -1.0}, "finite number >= 0; received -1.0 at step 10"),
        (0.1, {10: float("nan")}, "finite number >= 0; received nan at step 10"),
    ],
)
def test_invalid_schedules_are_errors_naming_the_value(learning_rate, schedule, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        PiecewiseLinearSchedule(learning_rate, schedule)
