"""BERT / LM with ALiBi biases instead of positions."""

from keras_attn.models.bert import Bert
from keras_attn.models.registry import register_variant


@register_variant("alibi")
class Alibi(Bert):
    """No position embeddings; every layer adds ALiBi's linear distance
    penalties (Press et al., 2022, https://arxiv.org/abs/2108.12409):
    the causal form under `application="lm"`, the symmetric `-m|i - j|`
    otherwise."""

    position_embedding = None
    relative_position_bias = "alibi"
