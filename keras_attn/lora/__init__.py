"""Low-rank adaptation (LoRA) of the builder's models: `enable_lora`,
`save_lora_weights`, `load_lora_weights`, `merge_lora`."""

from keras_attn.lora.adapters import enable_lora
from keras_attn.lora.adapters import load_lora_weights
from keras_attn.lora.adapters import merge_lora
from keras_attn.lora.adapters import save_lora_weights

__all__ = ["enable_lora", "load_lora_weights", "merge_lora", "save_lora_weights"]
