"""keras_attn: attention layers and a BERT-family model builder for Keras 3.

The public API is what this module exports; everything else is private.
"""

# Keras first, with a clear error where its backend is not installed and
# without TensorFlow's start-up lines (see `keras_attn.startup`).
from keras_attn.startup import import_keras

import_keras()

from keras_attn import generation  # noqa: E402
from keras_attn import layers  # noqa: E402
from keras_attn import lora  # noqa: E402
from keras_attn import losses  # noqa: E402
from keras_attn import optimizers  # noqa: E402
from keras_attn import preprocessing  # noqa: E402
from keras_attn import samplers  # noqa: E402
from keras_attn import serving  # noqa: E402
from keras_attn import training  # noqa: E402
from keras_attn.generation import AutoRegressiveDecoder  # noqa: E402
from keras_attn.generation import Generator  # noqa: E402
from keras_attn.layers import LocalMaskBaseline  # noqa: E402
from keras_attn.layers import MultiHeadAttention  # noqa: E402
from keras_attn.layers import TalkingHeadsAttention  # noqa: E402
from keras_attn.checkpoints import CheckpointError  # noqa: E402
from keras_attn.checkpoints import SkippedWeightsWarning  # noqa: E402
from keras_attn.checkpoints import UnusedWeightsWarning  # noqa: E402
from keras_attn.losses import TokenCrossEntropy  # noqa: E402
from keras_attn.models import InputError  # noqa: E402
from keras_attn.models import TTAEncoder  # noqa: E402
from keras_attn.models import Transformer  # noqa: E402
from keras_attn.models import TransformerBlock  # noqa: E402
from keras_attn.models import DecodeStep  # noqa: E402
from keras_attn.models import FullPass  # noqa: E402
from keras_attn.models import AttentionConfig  # noqa: E402
from keras_attn.models import FeedForwardConfig  # noqa: E402
from keras_attn.models import NormConfig  # noqa: E402
from keras_attn.models import PositionConfig  # noqa: E402
from keras_attn.models import TransformerConfig  # noqa: E402
from keras_attn.models import TransformerModel  # noqa: E402
from keras_attn.models import build_transformer_model  # noqa: E402
from keras_attn.models import get_layout_map  # noqa: E402
from keras_attn.models import load_checkpoint  # noqa: E402
from keras_attn.models import register_variant  # noqa: E402
from keras_attn.preprocessing import sequence_padding  # noqa: E402
from keras_attn.tokenizers import BpeTokenizer  # noqa: E402
from keras_attn.tokenizers import HuggingFaceTokenizer  # noqa: E402
from keras_attn.tokenizers import SpTokenizer  # noqa: E402
from keras_attn.tokenizers import T5Tokenizer  # noqa: E402
from keras_attn.tokenizers import Tokenizer  # noqa: E402
from keras_attn.tokenizers import load_vocab  # noqa: E402
from keras_attn.torch_runtime.plan import explain  # noqa: E402
from keras_attn.version import __version__  # noqa: E402

__all__ = [
    "AttentionConfig",
    "FeedForwardConfig",
    "NormConfig",
    "PositionConfig",
    "AutoRegressiveDecoder",
    "BpeTokenizer",
    "CheckpointError",
    "DecodeStep",
    "FullPass",
    "Generator",
    "HuggingFaceTokenizer",
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
    "explain",
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
    "serving",
    "training",
    "__version__",
]
