"""BERT / LM with KERPLE biases instead of positions."""

from keras_attn.models.bert import Bert
from keras_attn.models.registry import register_variant


@register_variant("kerple_log")
class KerpleLog(Bert):
    """No position embeddings; every layer adds one shared learned KERPLE bias
    (Chi et al., 2022, https://arxiv.org/abs/2205.09921), logarithmic form
    `-r1 log(1 + r2 |i - j|)`. `KerplePower` uses `-r1 |i - j|^r2`."""

    position_embedding = None
    relative_position_bias = "kerple_log"


@register_variant("kerple_power")
class KerplePower(Bert):
    """KERPLE's power form, `-r1 |i - j|^r2` with `0 < r2 <= 2`."""

    position_embedding = None
    relative_position_bias = "kerple_power"
