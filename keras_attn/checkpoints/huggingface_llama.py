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

from keras_attn import layer_names as names
from keras_attn.checkpoints.name_table import NameTable
from keras_attn.checkpoints.name_table import under
from keras_attn.checkpoints.source import Source
from keras_attn.checkpoints.source import merged
from keras_attn.checkpoints.source import rms_norm
from keras_attn.checkpoints.source import torch_linear

BLOCK = "layers.{layer}"
ATTENTION = names.attention("{layer}")
FEED_FORWARD = names.feed_forward("{layer}")

NAME_TABLE = NameTable(
    entries={
        f"{names.EMBEDDING_TOKEN}/embeddings": Source("embed_tokens.weight"),
        **rms_norm(names.norm(ATTENTION), f"{BLOCK}.input_layernorm.weight"),
        **merged(
            torch_linear(f"{ATTENTION}/{projection}_dense", f"{BLOCK}.self_attn.{projection[0]}_proj")
            for projection in ("query", "key", "value", "output")
        ),
        **rms_norm(f"{ATTENTION}/query_norm", f"{BLOCK}.self_attn.q_norm.weight"),
        **rms_norm(f"{ATTENTION}/key_norm", f"{BLOCK}.self_attn.k_norm.weight"),
        **rms_norm(names.norm(FEED_FORWARD), f"{BLOCK}.post_attention_layernorm.weight"),
        **torch_linear(f"{FEED_FORWARD}/intermediate_dense", f"{BLOCK}.mlp.gate_proj"),
        **torch_linear(f"{FEED_FORWARD}/gate_dense", f"{BLOCK}.mlp.up_proj"),
        **torch_linear(f"{FEED_FORWARD}/output_dense", f"{BLOCK}.mlp.down_proj"),
        **rms_norm(names.OUTPUT_NORM, "norm.weight"),
        # An untied head (`tie_word_embeddings: false`), `(vocab, hidden)`.
        f"{names.MLM_DECODER}/kernel": Source("lm_head.weight", transpose=True),
    },
    # Bare (`LlamaModel`) or under `model.` (`LlamaForCausalLM`); the head
    # is stored at the top.
    spellings=under("model.", "lm_head."),
    # Older files store the rotary frequencies as a buffer.
    ignored=(".rotary_emb.inv_freq",),
    # A tied head is the token embedding.
    duplicates={"lm_head.weight": "embed_tokens.weight"},
)
