"""ModernBERT (Warner et al., 2024): a pre-norm encoder with rotary
positions, a GeGLU feed-forward and alternating global and local attention."""

from keras_attn.models.registry import register_variant
from keras_attn.models.transformer import Transformer


@register_variant("modernbert")
class ModernBert(Transformer):
    """ModernBERT: an encoder of pre-norm blocks whose attention is global
    in some layers and within a local window in the others, each kind with a
    RoPE base of its own.

    Warner et al. (2024), "Smarter, Better, Faster, Longer: A Modern
    Bidirectional Encoder for Fast, Memory Efficient, and Long Context
    Finetuning and Inference", https://arxiv.org/abs/2412.13663. The token
    embedding is normalised (`Embedding-Norm`); there are no token types and
    no position table. Each block is `x + Attention(LN(x))` then
    `x + FFN(LN(x))`, except that block 0 attends to its input unnormalised
    (the embedding norm's output), and the last is followed by
    `Output-Norm` (`final_norm`). The feed-forward is GeGLU,
    `Wo(gelu(x W_in) * (x W_gate))` (`FeedForward(gated=True)`). RoPE
    rotates queries and keys in the `rotate_half` layout
    (`rotary_layout="half"`). The config's `layer_types` say which layers
    are local: those attend within `attention_window` (a query sees the keys
    within `attention_window // 2` on each side; ModernBERT's
    `local_attention`) with the RoPE base `sliding_rotary_base`, the others
    to every key with `rotary_base`. LayerNorms have biases with
    `norm_bias`, the projections with `attention_bias` and `mlp_bias`.
    `application="mlm"` is `ModernBertForMaskedLM`'s head, `LN(gelu(Dense(h)))`
    (no bias in the dense layer) then the tied token embedding and a bias;
    `application="encoder"` is `ModernBertModel`'s `last_hidden_state`.

    Padding: as BERT, tokens equal to the config's `pad_token_id` are
    padding (or a `padding_mask` with `padding_mask_input=True`); right
    padding gives transformers' numbers at the real tokens.

    Checkpoints: Hugging Face `model_type: modernbert` directories
    (safetensors or `pytorch_model.bin`, `ModernBertForMaskedLM` or
    `ModernBertModel`); the configs of transformers 5 and of the released
    checkpoints are both read (`keras_attn.checkpoints.families.modernbert`).
    """

    checkpoint_family = "modernbert"
    applications = ("encoder", "mlm")
    position_encoding = "rotary"
    rotary_layout = "half"
    position_embedding = None
    norm_first = True
    final_norm = True
    token_types = False
    use_bias = False
    mlm_dense_bias = False
    default_feed_forward_gated = True

    def make_block(self, index):
        block = super().make_block(index)
        if index == 0:
            # The embeddings are normalised already.
            block.attention_norm = None
        return block
