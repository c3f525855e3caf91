"""Learning-rate schedules and an AdamW with a one-pass torch update."""

from keras_attn.optimizers.adamw import AdamW
from keras_attn.optimizers.piecewise_linear_schedule import PiecewiseLinearSchedule
