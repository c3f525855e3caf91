"""Choosing one of two tensors at random while training (BERT-of-Theseus)."""

import keras
from keras import ops


@keras.saving.register_keras_serializable(package="keras_attn")
class BinaryRandomChoice(keras.layers.Layer):
    """Returns `successor` with probability `replacement_rate`, else
    `predecessor`, drawn once per training call; `successor` at inference.

    BERT-of-Theseus (Xu et al. 2020, "BERT-of-Theseus: Compressing BERT by
    Progressive Module Replacing", https://arxiv.org/abs/2002.02925) trains
    a shallow successor inside a trained predecessor: each successor module
    (one block, or the embeddings) stands in for its group of predecessor
    blocks with probability `p`, and after training only the successor runs.
    One such layer follows each pair of modules:

        b ~ Bernoulli(replacement_rate)        (one draw for the whole batch)
        output = b * successor + (1 - b) * predecessor    while training
        output = successor                                 at inference

    Both inputs are computed; the gradient reaches only the one chosen.
    bert4keras's example script calls this layer `BinaryRandomChoice` with
    the two tensors in a list and `p=0.5`.

    Args:
        replacement_rate: the probability of the successor while training,
            in `[0, 1]`.
        seed: optional int, for reproducible draws.
        **kwargs: other `keras.layers.Layer` arguments (`name`, `dtype`).

    Call arguments:
        predecessor: a tensor, the predecessor module's output.
        successor: a tensor of the same shape, the successor module's.
        training: whether to draw (Keras sets it in `fit`).

    The output carries `predecessor`'s Keras mask, if any (both modules
    see the same padding).

    Example:

    ```python
    choice = keras_attn.layers.BinaryRandomChoice(replacement_rate=0.5, seed=1)
    predecessor = keras.ops.zeros((2, 3))
    successor = keras.ops.ones((2, 3))
    choice(predecessor, successor)                 # ones: inference
    choice(predecessor, successor, training=True)  # ones or zeros
    ```
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
