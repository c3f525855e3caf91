"""Name table: Hugging Face Gemma 2 and Gemma 3 text weights (`model_type`
`gemma2`, `gemma3_text`: `Gemma2ForCausalLM`, `Gemma3ForCausalLM` and their
base models, safetensors or PyTorch) onto this library's variables.

LLaMA's layout (`huggingface_llama`; Gemma 1 stores exactly that) with a
norm on each side of both sub-layers: `input_layernorm` before the
attention, `post_attention_layernorm` on its output,
`pre_feedforward_layernorm` and `post_feedforward_layernorm` around the
feed-forward; Gemma 3 adds the per-head `q_norm` and `k_norm` (LLaMA's
table holds them). Every norm stores `w` of Gemma's `x * (1 + w)`, read as
it is (`RMSNormalization(scale_offset=1.0)` adds the one).
"""

from keras_attn import layer_names as names
from keras_attn.checkpoints import huggingface_llama
from keras_attn.checkpoints.huggingface_llama import ATTENTION
from keras_attn.checkpoints.huggingface_llama import BLOCK
from keras_attn.checkpoints.huggingface_llama import FEED_FORWARD
from keras_attn.checkpoints.source import rms_norm

NAME_TABLE = huggingface_llama.NAME_TABLE.replace(entries={
    **huggingface_llama.NAME_TABLE.entries,
    **rms_norm(names.post_norm(ATTENTION), f"{BLOCK}.post_attention_layernorm.weight"),
    **rms_norm(names.norm(FEED_FORWARD), f"{BLOCK}.pre_feedforward_layernorm.weight"),
    **rms_norm(names.post_norm(FEED_FORWARD), f"{BLOCK}.post_feedforward_layernorm.weight"),
})
