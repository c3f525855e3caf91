"""Learning-rate schedules (bert4keras's optimizer extensions, as Keras 3
schedules)."""

from keras_attn.optimizers.piecewise_linear_schedule import PiecewiseLinearSchedule
