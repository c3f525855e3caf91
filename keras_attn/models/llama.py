"""LLaMA (Touvron et al., 2023): pre-norm RMS blocks, a gated SiLU
feed-forward, rotary positions and grouped-query attention."""

from keras_attn.models.registry import register_variant
from keras_attn.models.transformer import Transformer


@register_variant("llama")
class Llama(Transformer):
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

    Like GPT, every application is causal and there is no pooler. RMS norms
    take no condition (`conditional_layer_norm` is refused).

    Checkpoints: Hugging Face `model_type: llama` directories (safetensors or
    `pytorch_model.bin`, `LlamaForCausalLM` or `LlamaModel`). Mistral,
    Qwen2, Qwen3, Phi-3 and the Gemmas are this class with their families'
    differences.
    """

    applications = ("lm", "encoder")
    checkpoint_family = "llama"
    causal = True
    pooler = False
    position_encoding = "rotary"
    rotary_layout = "half"
    position_embedding = None
    norm = "rms"
    norm_first = True
    final_norm = True
    embedding_norm = False
    token_types = False
    use_bias = False
    default_attention_bias = False
    attention_output_bias = None
    query_key_norm = False
    default_hidden_act = "silu"
    default_feed_forward_gated = True
    head = "embedding"

    def attention_arguments(self, index):
        arguments = super().attention_arguments(index)
        config = self.config
        if config.attention_bias is None:
            arguments["use_bias"] = self.default_attention_bias
        if self.attention_output_bias is not None:
            arguments["output_use_bias"] = self.attention_output_bias
        if self.query_key_norm:
            arguments["query_key_norm_epsilon"] = self.norm_epsilon()
            arguments["query_key_norm_scale_offset"] = self.norm_scale_offset
        if self.logit_soft_caps and config.attention_logit_soft_cap is not None:
            arguments["attention_logit_soft_cap"] = config.attention_logit_soft_cap
        return arguments
