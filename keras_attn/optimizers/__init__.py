"""Learning-rate schedules (bert4keras's optimizer extensions, as Keras 3
schedules) and an AdamW with a one-pass torch update."""

from keras_attn.optimizers.adamw import AdamW
from keras_attn.optimizers.piecewise_linear_schedule import PiecewiseLinearSchedule
