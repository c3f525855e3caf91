"""Gemma 3 (Gemma Team, 2025): Gemma 2 with query/key norms and a RoPE
base per attention kind."""

from keras_attn.models.gemma import GemmaTraits
from keras_attn.models.llama import Llama
from keras_attn.models.registry import register_variant


@register_variant("gemma3")
class Gemma3(GemmaTraits, Llama):
    """Gemma 3's text model: `Gemma2` that normalises each query and key
    head (`q_norm`, `k_norm`: `1 + w` RMS norms over `head_dim`, before
    RoPE), with a RoPE base of its own in the sliding-window layers.

    Gemma Team (2025), "Gemma 3 Technical Report",
    https://arxiv.org/abs/2503.19786. The "sliding_attention" layers of
    `layer_types` (by default five of every six, `sliding_window_pattern`)
    rotate with `rope_local_base_freq` (`sliding_rotary_base`), unscaled;
    the "full_attention" layers with `rope_theta` and the config's rope
    scaling (the 4B-27B checkpoints' `linear` factor 8). Gemma 3 caps no
    attention scores (transformers' Gemma 3 does not apply
    `attn_logit_softcapping`); `final_logit_softcapping` is read as Gemma
    2's.

    Checkpoints: Hugging Face `model_type: gemma3_text` directories
    (`Gemma3ForCausalLM`), Gemma 2's names plus `self_attn.q_norm` and
    `self_attn.k_norm`.
    """

    checkpoint_family = "gemma3"
    sublayer_post_norms = True
    query_key_norm = True

    def rotary_arguments(self, index):
        arguments = super().rotary_arguments(index)
        config = self.config
        if config.layer_types is not None and config.layer_types[index] == "sliding_attention":
            arguments["scaling"] = None
        return arguments
