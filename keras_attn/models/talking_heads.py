"""BERT with talking-heads attention (Shazeer et al., 2020)."""

from keras_attn import layers
from keras_attn.models.bert import Bert
from keras_attn.models.registry import register_variant


@register_variant("talking_heads")
class TalkingHeadsBert(Bert):
    """BERT whose self-attention is `keras_attn.TalkingHeadsAttention`.

    Shazeer et al. (2020), "Talking-Heads Attention",
    https://arxiv.org/abs/2003.02436. The mixing matrices start as the
    identity, so a BERT checkpoint loads into this variant (the mixing
    matrices are not in it) and computes exactly BERT until fine-tuned.
    """

    attention_layer = layers.TalkingHeadsAttention
