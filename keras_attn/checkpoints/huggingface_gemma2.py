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

from keras_attn.checkpoints import huggingface_llama
from keras_attn.checkpoints.source import Source

_BLOCK = "layers.{layer}"
_ATTENTION = "Transformer-{layer}-MultiHeadSelfAttention"
_FEED_FORWARD = "Transformer-{layer}-FeedForward"

TABLE = {
    **huggingface_llama.TABLE,
    f"{_ATTENTION}-Post-Norm/scale": Source(f"{_BLOCK}.post_attention_layernorm.weight"),
    f"{_FEED_FORWARD}-Norm/scale": Source(f"{_BLOCK}.pre_feedforward_layernorm.weight"),
    f"{_FEED_FORWARD}-Post-Norm/scale": Source(f"{_BLOCK}.post_feedforward_layernorm.weight"),
}

IGNORED = huggingface_llama.IGNORED
DUPLICATES = huggingface_llama.DUPLICATES
candidates = huggingface_llama.candidates
