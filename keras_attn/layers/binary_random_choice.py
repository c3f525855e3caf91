"""Choosing one of two tensors at random while training (BERT-of-Theseus)."""

import keras
from keras import ops


@keras.saving.register_keras_serializable(package="keras_attn")
class BinaryRandomChoice(keras.layers.Layer):
    """`successor` with probability `replacement_rate`, else `predecessor`, one
    draw per training call; `successor` at inference (BERT-of-Theseus, Xu et
    al. 2020, https://arxiv.org/abs/2002.02925, one such layer after each
    pair of modules). The gradient reaches only the tensor chosen; the output
    carries `predecessor`'s Keras mask.

    Args:
        replacement_rate: the successor's probability while training, in
            `[0, 1]`; ValueError otherwise.
        seed: optional int, for reproducible draws.
        **kwargs: base layer arguments.

    Call arguments:
        predecessor: the predecessor module's output.
        successor: the successor module's, of the same shape.
        training: whether to draw.

    Example:

    >>> choice = keras_attn.layers.BinaryRandomChoice(replacement_rate=0.5, seed=1)
    >>> choice(predecessor, successor, training=True)  # one of the two
    """

    def __init__(self, replacement_rate=0.5, seed=None, **kwargs):
        super().__init__(**kwargs)
        if isinstance(replacement_rate, bool) or not 0.0 <= float(replacement_rate) <= 1.0:
            raise ValueError(
                "`replacement_rate` is a probability in [0, 1]; received "
                f"{replacement_rate!r}."
            )
        self.replacement_rate = float(replacement_rate)
        self.seed = seed
        self.seed_generator = keras.random.SeedGenerator(seed)
        self.supports_masking = True

    def call(self, predecessor, successor, training=None):
        if not training:
            return successor
        draw = keras.random.uniform((), seed=self.seed_generator)
        chosen = ops.cast(ops.less(draw, self.replacement_rate), successor.dtype)
        return chosen * successor + (1 - chosen) * predecessor

    def compute_output_shape(self, predecessor_shape, successor_shape):
        return successor_shape

    def get_config(self):
        config = super().get_config()
        config.update(replacement_rate=self.replacement_rate, seed=self.seed)
        return config
