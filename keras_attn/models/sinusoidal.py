"""BERT with the original Transformer's fixed sinusoidal positions."""

from keras_attn.models.bert import Bert
from keras_attn.models.registry import register_variant


@register_variant("sinusoidal")
class SinusoidalBert(Bert):
    """BERT whose absolute positions are the fixed sinusoids of Vaswani et al.
    (2017), https://arxiv.org/abs/1706.03762, instead of a learned table: no
    position weights and no maximum length."""

    position_embedding = "sinusoidal"
