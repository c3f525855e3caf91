"""KERPLE: kernelized relative positional embeddings."""

import math

import keras
from keras import ops

from keras_attn.layers.relative_position_bias import RelativePositionBias
from keras_attn.layers.relative_position_bias import per_head

KERPLE_FORMS = ("log", "power")


@keras.saving.register_keras_serializable(package="keras_attn")
class KerpleBias(RelativePositionBias):
    """Learned conditionally positive definite distance kernels as biases (Chi
    et al., 2022, "KERPLE", https://arxiv.org/abs/2205.09921). Per head `h`:

    - log: `bias_h(i, j) = -r1_h log(1 + r2_h |i - j|)`;
    - power: `bias_h(i, j) = -r1_h |i - j|^(r2_h)`, `0 < r2_h <= 2`.

    `r1 = softplus(a)`, `r2 = softplus(b)` (log) or `2 sigmoid(b)` (power), `a,
    b` the `(heads,)` variables, starting at `r1 = r2 = 1`. Called and returned
    as `RelativePositionBias`.

    Args:
        heads: number of attention heads.
        form: `"log"` or `"power"`; ValueError otherwise.
        **kwargs: base layer arguments.
    """

    checkpoint_free_weights = ("r1", "r2")

    def __init__(self, heads, form="log", **kwargs):
        super().__init__(**kwargs)
        if form not in KERPLE_FORMS:
            raise ValueError(f"`form` must be one of {KERPLE_FORMS}; received {form!r}.")
        self.heads = heads
        self.form = form

    def build(self, query_shape=None, key_shape=None):
        softplus_inverse_of_one = math.log(math.e - 1.0)
        self.r1_variable = self.add_weight(
            name="r1",
            shape=(self.heads,),
            initializer=keras.initializers.Constant(softplus_inverse_of_one),
        )
        self.r2_variable = self.add_weight(
            name="r2",
            shape=(self.heads,),
            initializer=keras.initializers.Constant(
                softplus_inverse_of_one if self.form == "log" else 0.0
            ),
        )

    @property
    def r1(self):
        return ops.softplus(ops.cast(self.r1_variable, "float32"))

    @property
    def r2(self):
        raw = ops.cast(self.r2_variable, "float32")
        return ops.softplus(raw) if self.form == "log" else 2.0 * ops.sigmoid(raw)

    def bias(self, distance):
        distance = ops.abs(ops.cast(distance, "float32"))
        r1 = per_head(self.r1, distance)
        r2 = per_head(self.r2, distance)
        if self.form == "log":
            return -r1 * ops.log(1.0 + r2 * distance)
        return -r1 * ops.power(distance, r2)

    def get_config(self):
        config = super().get_config()
        config.update({"heads": self.heads, "form": self.form})
        return config
