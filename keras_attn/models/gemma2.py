"""Gemma 2 (Gemma Team, 2024): Gemma with a norm after each sub-layer,
soft-capped logits and alternating local and global attention."""

from keras_attn.models.gemma import GemmaTraits
from keras_attn.models.llama import Llama
from keras_attn.models.registry import register_variant


@register_variant("gemma2")
class Gemma2(GemmaTraits, Llama):
    """Gemma 2: `Gemma` whose blocks normalise each sub-layer's output too,
    and whose layers alternate between a sliding window and global
    attention.

    Gemma Team (2024), "Gemma 2: Improving Open Language Models at a
    Practical Size", https://arxiv.org/abs/2408.00118. Each block is

        x = x + PostNorm(Attention(Norm(x)))
        x = x + PostNorm(FFN(Norm(x)))

    (`TransformerBlock`'s `attention_post_norm` and `feed_forward_post_norm`,
    named `...-Post-Norm`). The scores are scaled by
    `query_pre_attn_scalar ** -0.5` and capped by `attn_logit_softcapping`,
    the logits by `final_logit_softcapping` (see `Gemma`). The config's
    `layer_types` (by default every other layer, from the first, is
    "sliding_attention") say which layers attend within `sliding_window`
    (`attention_window`: query `i` sees the keys `i - w < j <= i`); the
    others see every earlier key, and cached decoding keeps every position.

    Checkpoints: Hugging Face `model_type: gemma2` directories, Gemma's
    names plus `post_attention_layernorm`, `pre_feedforward_layernorm` and
    `post_feedforward_layernorm` (`checkpoints.huggingface_gemma2`).
    """

    checkpoint_family = "gemma2"
    sublayer_post_norms = True
