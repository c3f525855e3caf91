"""Low-rank adaptation (LoRA) of the builder's models.

`enable_lora` adds Keras' own LoRA adapters (`Dense.enable_lora`) to the
attention projections, and optionally the feed-forward projections, of any
model `build_transformer_model` returns, and freezes everything else;
`save_lora_weights` / `load_lora_weights` store the adapters alone;
`merge_lora` folds them into the kernels.
"""

from keras_attn.lora.adapters import enable_lora
from keras_attn.lora.adapters import load_lora_weights
from keras_attn.lora.adapters import merge_lora
from keras_attn.lora.adapters import save_lora_weights

__all__ = ["enable_lora", "load_lora_weights", "merge_lora", "save_lora_weights"]
