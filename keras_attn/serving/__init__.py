"""Serving many requests at once: continuous batching over a paged
key/value cache (`Engine`), each request with its own sampling
(`SamplingParams`) and streamed text (`Request`, `Delta`, `TextStream`)."""

from keras_attn.serving.block_pool import BlockPool
from keras_attn.serving.engine import Engine
from keras_attn.serving.request import Delta
from keras_attn.serving.request import Request
from keras_attn.serving.sampling import SamplingParams
from keras_attn.serving.sampling import TokenLogprob
from keras_attn.serving.streaming import TextStream

__all__ = [
    "BlockPool", "Delta", "Engine", "Request", "SamplingParams", "TextStream", "TokenLogprob",
]
