"""Autoregressive generation with key/value caches for `lm` and `unilm` models."""

from keras_attn.generation.cached_forward import CachedForward
from keras_attn.generation.cached_forward import DecodingCache
from keras_attn.generation.generator import Generator
