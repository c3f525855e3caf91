"""keras_attn: attention layers and a BERT-family model builder for Keras 3.

The public API is what this module exports; everything else is private.
"""

from keras_attn import generation
from keras_attn import layers
from keras_attn import lora
from keras_attn import losses
from keras_attn import optimizers
from keras_attn import preprocessing
from keras_attn import samplers
from keras_attn import training
from keras_attn.generation import AutoRegressiveDecoder
from keras_attn.generation import Generator
from keras_attn.layers import LocalMaskBaseline
from keras_attn.layers import MultiHeadAttention
from keras_attn.layers import TalkingHeadsAttention
from keras_attn.checkpoints import CheckpointError
from keras_attn.checkpoints import SkippedWeightsWarning
from keras_attn.checkpoints import UnusedWeightsWarning
from keras_attn.losses import TokenCrossEntropy
from keras_attn.models import InputError
from keras_attn.models import TTAEncoder
from keras_attn.models import Transformer
from keras_attn.models import TransformerBlock
from keras_attn.models import TransformerConfig
from keras_attn.models import TransformerModel
from keras_attn.models import build_transformer_model
from keras_attn.models import get_layout_map
from keras_attn.models import load_checkpoint
from keras_attn.models import register_variant
from keras_attn.preprocessing import sequence_padding
from keras_attn.tokenizers import BpeTokenizer
from keras_attn.tokenizers import SpTokenizer
from keras_attn.tokenizers import T5Tokenizer
from keras_attn.tokenizers import Tokenizer
from keras_attn.tokenizers import load_vocab
from keras_attn.version import __version__

__all__ = [
    "AutoRegressiveDecoder",
    "BpeTokenizer",
    "CheckpointError",
    "Generator",
    "InputError",
    "LocalMaskBaseline",
    "MultiHeadAttention",
    "SkippedWeightsWarning",
    "SpTokenizer",
    "T5Tokenizer",
    "TTAEncoder",
    "TalkingHeadsAttention",
    "Transformer",
    "TransformerBlock",
    "TransformerConfig",
    "TokenCrossEntropy",
    "Tokenizer",
    "TransformerModel",
    "UnusedWeightsWarning",
    "build_transformer_model",
    "generation",
    "get_layout_map",
    "layers",
    "lora",
    "load_checkpoint",
    "load_vocab",
    "losses",
    "optimizers",
    "preprocessing",
    "register_variant",
    "samplers",
    "sequence_padding",
    "training",
    "__version__",
]
