"""Gemma (Gemma Team, 2024): LLaMA's block with `1 + w` RMS norms, a scaled
token embedding and a GeGLU feed-forward."""

from keras_attn.models.llama import Llama
from keras_attn.models.registry import register_variant


class GemmaTraits:
    """What every Gemma generation computes differently from `Llama`
    (mixed in before it): `1 + w` RMS norms, a token embedding scaled by
    `sqrt(hidden_size)`, a GeGLU feed-forward, soft-capped logits, and the
    scores scaled by the config's `query_pre_attention_scalar ** -0.5`
    where it gives one."""

    norm_scale_offset = 1.0
    embedding_scale = True
    default_hidden_act = "gelu_approximate"
    logit_soft_caps = True

    def attention_scale(self, index):
        scalar = self.config.query_pre_attention_scalar
        return True if scalar is None else scalar ** -0.5


@register_variant("gemma")
class Gemma(GemmaTraits, Llama):
    """Gemma: `Llama` whose RMS norms multiply by `1 + w`, whose token
    embedding is scaled by `sqrt(hidden_size)`, and whose feed-forward is
    GeGLU.

    Gemma Team (2024), "Gemma: Open Models Based on Gemini Research and
    Technology", https://arxiv.org/abs/2403.08295. What differs from LLaMA:

    - every norm is `x / rms(x) * (1 + w)`, computed in float32
      (`RMSNormalization(scale_offset=1.0)`); the variables hold the
      checkpoint's `w`;
    - the looked-up token rows are multiplied by `sqrt(hidden_size)`, cast
      to the compute dtype first as transformers casts it to the weights'
      (`TokenEmbedding(lookup_scale=...)`); the tied head is not scaled;
    - the feed-forward is `down(gelu_tanh(gate(x)) * up(x))` (Shazeer 2020's
      GeGLU), and the head is tied unless `tie_word_embeddings: false`;
    - `head_dim` is its own width (256 in the released models, whatever
      `hidden_size / num_attention_heads`), with `num_key_value_heads`
      key/value heads (Gemma 2B: one).

    The fields Gemma 2 and Gemma 3 configs add are read where a config gives
    them: `query_pre_attention_scalar` (scores scaled by its `** -0.5`),
    `attention_logit_soft_cap` (each score `c tanh(s / c)` before the mask,
    in the attention kernel) and `final_logit_soft_cap` (the logits so
    capped, `MLM-Soft-Cap`).

    Checkpoints: Hugging Face `model_type: gemma` directories, LLaMA's
    names. Gemma 2 and Gemma 3 (`"gemma2"`, `"gemma3"`) share these traits
    (`GemmaTraits`).
    """

    checkpoint_family = "gemma"
