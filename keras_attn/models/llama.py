"""LLaMA (Touvron et al., 2023): pre-norm RMS blocks, a gated SiLU
feed-forward, rotary positions and grouped-query attention."""

from keras_attn import layers
from keras_attn.models.gpt import Gpt
from keras_attn.models.registry import register_variant


@register_variant("llama")
class Llama(Gpt):
    """LLaMA: a causal decoder of pre-norm blocks with RMS norms, rotary
    positions, grouped-query attention and SwiGLU, no biases.

    Touvron et al. (2023), "LLaMA: Open and Efficient Foundation Language
    Models", https://arxiv.org/abs/2302.13971, and "Llama 2"
    (https://arxiv.org/abs/2307.09288, grouped-query attention). Each block
    is `x + Attention(RMSNorm(x))` then `x + FFN(RMSNorm(x))`, the last
    followed by `Output-Norm` (Hugging Face's `norm`); the feed-forward is
    `down(silu(gate(x)) * up(x))` (`FeedForward(gated=True)`, Shazeer 2020);
    the attention has `num_key_value_heads` key/value heads
    (`MultiHeadAttention(key_value_heads=...)`: the cache holds only those)
    and rotates queries and keys by RoPE in LLaMA's `rotate_half` layout
    (`rotary_layout="half"`), with the config's `rope_theta` and
    `rope_scaling` (`linear`, `dynamic`, `llama3`, ...). There are no token
    types, no position table and no embedding norm; the head is `lm_head`
    or, with `tie_word_embeddings: true` (Llama 3.2), the token embedding.
    `attention_bias` and `mlp_bias` add biases to the attention's
    projections and to the feed-forward's; `head_dim` sets the per-head
    width independently of `hidden_size / num_attention_heads`.

    Padding: transformers never reads a token id as padding (its
    `attention_mask` does), so the model has no `pad_token_id`; build it
    with `padding_mask_input=True` and give a `padding_mask` for padded
    batches (right or left padding: positions are relative). `generate`
    pads prompts itself.

    Checkpoints: Hugging Face `model_type: llama` directories (safetensors or
    `pytorch_model.bin`, `LlamaForCausalLM` or `LlamaModel`). Mistral,
    Qwen2 and Qwen3 (`"mistral"`, `"qwen2"`, `"qwen3"`) are this class with
    their families' differences.
    """

    checkpoint_family = "llama"
    position_encoding = "rotary"
    rotary_layout = "half"
    norm_first = True
    token_types = False
    use_bias = False
    default_hidden_act = "silu"
    default_feed_forward_gated = True
    # Whether the attention's projections have biases when the config does
    # not say (`attention_bias`), and whether its output projection has one
    # (None: as the others; Qwen2's has none).
    default_attention_bias = False
    attention_output_bias = None
    # A per-head RMS norm of the queries and keys before RoPE (Qwen3).
    query_key_norm = False

    def __init__(self, config, conditional_layer_norm=None, **kwargs):
        if conditional_layer_norm is not None:
            raise ValueError(
                f"{type(self).__name__} has RMS norms, not conditional LayerNorms; build "
                "it without conditional_layer_norm."
            )
        super().__init__(config, **kwargs)

    def make_position_embedding(self):
        return None

    def make_output_norm(self):
        return self.layer_norm("Output-Norm")

    def layer_norm(self, name):
        return layers.RMSNormalization(epsilon=self.norm_epsilon(), name=name)

    def attention_arguments(self, index):
        arguments = super().attention_arguments(index)
        if self.config.attention_bias is None:
            arguments["use_bias"] = self.default_attention_bias
        if self.attention_output_bias is not None:
            arguments["output_use_bias"] = self.attention_output_bias
        if self.query_key_norm:
            arguments["query_key_norm_epsilon"] = self.norm_epsilon()
        return arguments
