"""Name table: Hugging Face Phi-3 weights (`model_type` `phi3`:
`Phi3ForCausalLM` and `Phi3Model`, safetensors or PyTorch) onto this
library's variables.

LLaMA's layout (`huggingface_llama`) with two fused projections:
`self_attn.qkv_proj` holds the query, key and value kernels side by side,
`num_attention_heads * head_dim`, then `num_key_value_heads * head_dim`
twice (an unequal split under grouped-query attention, whose widths the
model's own `query_dense`, `key_dense` and `value_dense` give), and
`mlp.gate_up_proj` the gate (`gate_proj`, the activated branch,
`intermediate_dense`) then the up projection (`gate_dense`), in two equal
halves, as transformers' `Phi3MLP` chunks it.
"""

from keras_attn.checkpoints import huggingface_llama
from keras_attn.checkpoints.source import torch_linear

_BLOCK = "layers.{layer}"
_ATTENTION = "Transformer-{layer}-MultiHeadSelfAttention"
_FEED_FORWARD = "Transformer-{layer}-FeedForward"
_QKV = tuple(f"{_ATTENTION}/{name}_dense" for name in ("query", "key", "value"))

TABLE = {
    **huggingface_llama.TABLE,
    **{
        projection: source
        for index, layer in enumerate(_QKV)
        for projection, source in torch_linear(
            layer, f"{_BLOCK}.self_attn.qkv_proj", part=(index, _QKV)
        ).items()
    },
    **torch_linear(f"{_FEED_FORWARD}/intermediate_dense", f"{_BLOCK}.mlp.gate_up_proj",
                   part=(0, 2)),
    **torch_linear(f"{_FEED_FORWARD}/gate_dense", f"{_BLOCK}.mlp.gate_up_proj", part=(1, 2)),
}

IGNORED = huggingface_llama.IGNORED
DUPLICATES = huggingface_llama.DUPLICATES
candidates = huggingface_llama.candidates
