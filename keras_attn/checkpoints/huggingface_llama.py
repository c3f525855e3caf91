"""Name table: Hugging Face LLaMA-style weights (`model_type` `llama`,
`mistral`, `qwen2`, `qwen3`: `LlamaModel`/`LlamaForCausalLM` and their
siblings, safetensors or PyTorch) onto this library's variables.

The four families store one layout: `embed_tokens`, per block
`input_layernorm`, `self_attn.{q,k,v,o}_proj` (Qwen3 adds the per-head
`q_norm` and `k_norm`), `post_attention_layernorm`,
`mlp.{gate,up,down}_proj`, then the final `norm` and `lm_head`.
`torch.nn.Linear` stores kernels `(out, in)`, hence the transposes. The
query and key columns stay in the checkpoint's order: the attention
rotates them in LLaMA's `rotate_half` layout (`rotary_layout="half"`).
The gated feed-forward's activated branch (`intermediate_dense`) is
`gate_proj` and its linear branch (`gate_dense`) `up_proj`, as in
`FeedForward(gated=True)`.
"""

from keras_attn.checkpoints.source import Source
from keras_attn.checkpoints.source import torch_linear

_BLOCK = "layers.{layer}"
_ATTENTION = "Transformer-{layer}-MultiHeadSelfAttention"
_FEED_FORWARD = "Transformer-{layer}-FeedForward"


TABLE = {
    "Embedding-Token/embeddings": Source("embed_tokens.weight"),
    f"{_ATTENTION}-Norm/scale": Source(f"{_BLOCK}.input_layernorm.weight"),
    **torch_linear(f"{_ATTENTION}/query_dense", f"{_BLOCK}.self_attn.q_proj"),
    **torch_linear(f"{_ATTENTION}/key_dense", f"{_BLOCK}.self_attn.k_proj"),
    **torch_linear(f"{_ATTENTION}/value_dense", f"{_BLOCK}.self_attn.v_proj"),
    **torch_linear(f"{_ATTENTION}/output_dense", f"{_BLOCK}.self_attn.o_proj"),
    f"{_ATTENTION}/query_norm/scale": Source(f"{_BLOCK}.self_attn.q_norm.weight"),
    f"{_ATTENTION}/key_norm/scale": Source(f"{_BLOCK}.self_attn.k_norm.weight"),
    f"{_FEED_FORWARD}-Norm/scale": Source(f"{_BLOCK}.post_attention_layernorm.weight"),
    **torch_linear(f"{_FEED_FORWARD}/intermediate_dense", f"{_BLOCK}.mlp.gate_proj"),
    **torch_linear(f"{_FEED_FORWARD}/gate_dense", f"{_BLOCK}.mlp.up_proj"),
    **torch_linear(f"{_FEED_FORWARD}/output_dense", f"{_BLOCK}.mlp.down_proj"),
    "Output-Norm/scale": Source("norm.weight"),
    # An untied head (`tie_word_embeddings: false`), `(vocab, hidden)`.
    "MLM-Decoder/kernel": Source("lm_head.weight", transpose=True),
}

# Older files store the rotary frequencies as a buffer.
IGNORED = (".rotary_emb.inv_freq",)

# A tied head is the token embedding.
DUPLICATES = {"lm_head.weight": "embed_tokens.weight"}


def candidates(name):
    """Bare (`LlamaModel`) or under `model.` (`LlamaForCausalLM`); the head
    is stored at the top."""
    if name.startswith("lm_head."):
        return (name,)
    return (name, f"model.{name}")
