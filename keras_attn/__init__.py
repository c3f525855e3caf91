"""keras_attn: attention layers and a BERT-family model builder for Keras 3.

The public API is what this module exports; everything else is private.
"""

from keras_attn.layers import MultiHeadAttention
from keras_attn.layers import TalkingHeadsAttention
from keras_attn.version import __version__

__all__ = [
    "MultiHeadAttention",
    "TalkingHeadsAttention",
    "__version__",
]
