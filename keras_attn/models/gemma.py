"""Gemma (Gemma Team, 2024): LLaMA's block with `1 + w` RMS norms, a scaled
token embedding and a GeGLU feed-forward."""

import math

from keras_attn import layers
from keras_attn.models.llama import Llama
from keras_attn.models.registry import register_variant
from keras_attn.torch_runtime.direct_call import layer_caller


@register_variant("gemma")
class Gemma(Llama):
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

    The traits Gemma 2 and Gemma 3 add are read here too, where their
    configs give them: `query_pre_attention_scalar` (scores scaled by its
    `** -0.5`), `attention_logit_soft_cap` (each score `c tanh(s / c)`
    before the mask, in the attention kernel) and `final_logit_soft_cap`
    (the logits so capped, `MLM-Soft-Cap`).

    Checkpoints: Hugging Face `model_type: gemma` directories, LLaMA's
    names. Gemma 2 and Gemma 3 (`"gemma2"`, `"gemma3"`) build on this
    class.
    """

    checkpoint_family = "gemma"
    default_hidden_act = "gelu_approximate"
    # The added one of Gemma's `x * (1 + w)` norms.
    norm_scale_offset = 1.0

    def layer_norm(self, name):
        return layers.RMSNormalization(
            epsilon=self.norm_epsilon(), scale_offset=self.norm_scale_offset, name=name
        )

    def make_embedding_layers(self):
        config = self.config
        embedding_layers = super().make_embedding_layers()
        embedding_layers["token"] = layers.TokenEmbedding(
            config.vocab_size,
            config.embedding_width,
            embeddings_initializer=self.initializer(),
            lookup_scale=math.sqrt(config.hidden_size),
            name="Embedding-Token",
        )
        return embedding_layers

    def attention_scale(self, index):
        scalar = self.config.query_pre_attention_scalar
        return True if scalar is None else scalar ** -0.5

    def attention_arguments(self, index):
        arguments = super().attention_arguments(index)
        if self.config.attention_logit_soft_cap is not None:
            arguments["attention_logit_soft_cap"] = self.config.attention_logit_soft_cap
        if self.query_key_norm:
            arguments["query_key_norm_scale_offset"] = self.norm_scale_offset
        return arguments

    def make_head_layers(self):
        head = super().make_head_layers()
        cap = self.config.final_logit_soft_cap
        if self.with_mlm and cap is not None:
            head["soft_cap"] = layers.LogitSoftCap(cap, name="MLM-Soft-Cap")
        return head

    def language_model_head(self, hidden, condition=None, cache_step=None):
        """The head's logits (`Gpt.language_model_head`), soft-capped with
        `final_logit_soft_cap`."""
        logits = super().language_model_head(hidden, condition, cache_step)
        if "soft_cap" not in self.head_layers:
            return logits
        return layer_caller(cache_step is not None)(self.head_layers["soft_cap"], logits)
