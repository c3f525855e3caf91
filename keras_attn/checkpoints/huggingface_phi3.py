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
from keras_attn.checkpoints.huggingface_llama import ATTENTION
from keras_attn.checkpoints.huggingface_llama import BLOCK
from keras_attn.checkpoints.huggingface_llama import FEED_FORWARD
from keras_attn.checkpoints.source import fused
from keras_attn.checkpoints.source import torch_linear

_QKV = tuple(f"{ATTENTION}/{name}_dense" for name in ("query", "key", "value"))

NAME_TABLE = huggingface_llama.NAME_TABLE.replace(entries={
    **huggingface_llama.NAME_TABLE.entries,
    **fused(_QKV, f"{BLOCK}.self_attn.qkv_proj", torch_linear, widths_from_model=True),
    **fused(
        (f"{FEED_FORWARD}/intermediate_dense", f"{FEED_FORWARD}/gate_dense"),
        f"{BLOCK}.mlp.gate_up_proj",
        torch_linear,
    ),
})
