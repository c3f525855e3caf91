"""Autoregressive generation with key/value caches for `lm` and `unilm` models."""

from keras_attn.generation.auto_regressive_decoder import AutoRegressiveDecoder
from keras_attn.generation.cached_forward import CachedForward
from keras_attn.generation.cached_forward import DecodingCache
from keras_attn.generation.generator import Generator

__all__ = ["AutoRegressiveDecoder", "CachedForward", "DecodingCache", "Generator"]
