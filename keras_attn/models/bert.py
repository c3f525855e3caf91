"""BERT (Devlin et al., 2019)."""

from keras_attn.models.transformer import Transformer
from keras_attn.models.registry import register_variant


@register_variant("bert")
class Bert(Transformer):
    """BERT: learned absolute positions, multi-head attention, post-LN blocks.

    Devlin, Chang, Lee, Toutanova (2019), "BERT: Pre-training of Deep
    Bidirectional Transformers for Language Understanding",
    https://arxiv.org/abs/1810.04805. Feed-forward blocks use the exact erf
    GELU, as Google's release and Hugging Face do. The template in
    `Transformer` is BERT; this class names it.
    """
