"""BERT / LM with KERPLE biases instead of positions."""

from keras_attn import layers
from keras_attn.models.bert import Bert
from keras_attn.models.registry import register_variant


@register_variant("kerple_log")
class KerpleLog(Bert):
    """No position embeddings; every layer adds one shared learned KERPLE bias
    (Chi et al., 2022, https://arxiv.org/abs/2205.09921), logarithmic form
    `-r1 log(1 + r2 |i - j|)`. `KerplePower` uses `-r1 |i - j|^r2`."""

    kerple_form = "log"

    def make_position_embedding(self):
        return None

    def make_position_bias(self):
        return layers.KerpleBias(self.config.num_heads, form=self.kerple_form, name="Position-Bias")


@register_variant("kerple_power")
class KerplePower(KerpleLog):
    """KERPLE's power form, `-r1 |i - j|^r2` with `0 < r2 <= 2`."""

    kerple_form = "power"
