"""`PiecewiseLinearSchedule`: bert4keras's `extend_with_piecewise_linear_lr`
as a Keras learning-rate schedule."""

import math
import numbers

import keras
from keras import ops


@keras.saving.register_keras_serializable(package="keras_attn")
class PiecewiseLinearSchedule(keras.optimizers.schedules.LearningRateSchedule):
    """`learning_rate` times a multiplier interpolated linearly between
    `{step: multiplier}` points (bert4keras's `piecewise_linear`, `from_zero=True`).

    The multiplier is 0 at step 0 unless `schedule` gives step 0, linear between
    points, and the last point's value after it; the step is the optimizer's
    `iterations`. bert4keras's `extend_with_piecewise_linear_lr(Adam)(
    learning_rate=lr, lr_schedule=schedule)` is `keras.optimizers.Adam(
    PiecewiseLinearSchedule(lr, schedule))`.

    Args:
        learning_rate: the base rate, a positive number.
        schedule: dict of step (an integer >= 0) -> multiplier (a finite number
            >= 0), at least one point.

    Raises:
        ValueError: for any argument outside the above (the message names it).

    Example (warm up over 1000 steps, then decay to a tenth at step 2000):

    >>> schedule = keras_attn.optimizers.PiecewiseLinearSchedule(2e-5, {1000: 1.0, 2000: 0.1})
    """

    def __init__(self, learning_rate, schedule):
        if (
            isinstance(learning_rate, bool)
            or not isinstance(learning_rate, numbers.Real)
            or not math.isfinite(learning_rate)
            or learning_rate <= 0
        ):
            raise ValueError(
                "PiecewiseLinearSchedule: `learning_rate` must be a positive number; "
                f"received {learning_rate!r}."
            )
        if not isinstance(schedule, dict) or not schedule:
            raise ValueError(
                "PiecewiseLinearSchedule: `schedule` must be a non-empty dict of "
                f"step -> multiplier, e.g. {{1000: 1.0, 2000: 0.1}}; received {schedule!r}."
            )
        for step, multiplier in schedule.items():
            if isinstance(step, bool) or not isinstance(step, numbers.Integral) or step < 0:
                raise ValueError(
                    "PiecewiseLinearSchedule: every step of `schedule` must be an "
                    f"integer >= 0; received the step {step!r}."
                )
            if (
                isinstance(multiplier, bool)
                or not isinstance(multiplier, numbers.Real)
                or not math.isfinite(multiplier)
                or multiplier < 0
            ):
                raise ValueError(
                    "PiecewiseLinearSchedule: every multiplier of `schedule` must be a "
                    f"finite number >= 0; received {multiplier!r} at step {step}."
                )
        self.learning_rate = float(learning_rate)
        self.schedule = {int(step): float(schedule[step]) for step in sorted(schedule)}

    def multiplier(self, step):
        """The float32 multiplier at `step`."""
        points = sorted(self.schedule.items())
        if points[0][0] != 0:
            points.insert(0, (0, 0.0))
        step = ops.cast(step, "float32")
        value = ops.full((), points[-1][1], "float32")
        # From the last segment back, so the segment that holds `step` wins.
        for (start, begin), (end, finish) in reversed(list(zip(points, points[1:]))):
            slope = (finish - begin) / (end - start)
            value = ops.where(step < end, begin + slope * (step - start), value)
        return value

    def __call__(self, step):
        return self.learning_rate * self.multiplier(step)

    def get_config(self):
        return {"learning_rate": self.learning_rate, "schedule": dict(self.schedule)}

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        # JSON stores the dict's integer steps as strings.
        config["schedule"] = {int(step): value for step, value in config["schedule"].items()}
        return cls(**config)
