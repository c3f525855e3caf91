"""The model builder and its variants.

Importing this package registers every built-in variant: each variant module
below registers itself with `register_variant` when imported.
"""

from keras_attn.models.registry import VARIANTS
from keras_attn.models.registry import register_variant
from keras_attn.models.transformer import Transformer
from keras_attn.models.transformer_block import TransformerBlock
from keras_attn.models.transformer_config import AttentionConfig
from keras_attn.models.transformer_config import FeedForwardConfig
from keras_attn.models.transformer_config import NormConfig
from keras_attn.models.transformer_config import PositionConfig
from keras_attn.models.transformer_config import TransformerConfig
from keras_attn.models.config_files import load_config
from keras_attn.models.transformer_model import TransformerModel
from keras_attn.models.input_contract import InputContract
from keras_attn.models.input_contract import InputError
from keras_attn.models.layout_map import get_layout_map
from keras_attn.models.builder import build_transformer_model
from keras_attn.checkpoints.loading import load_checkpoint

# The built-in variants, registered on import.
from keras_attn.models.bert import Bert
from keras_attn.models.roberta import Roberta
from keras_attn.models.roberta_plus import RobertaPlus
from keras_attn.models.talking_heads import TalkingHeadsBert
from keras_attn.models.tta import Tta
from keras_attn.models.sinusoidal import SinusoidalBert
from keras_attn.models.roformer import Roformer
from keras_attn.models.roformer_v2 import RoformerV2
from keras_attn.models.nezha import Nezha
from keras_attn.models.gau_alpha import GauAlpha
from keras_attn.models.alibi import Alibi
from keras_attn.models.kerple import KerpleLog
from keras_attn.models.kerple import KerplePower
from keras_attn.models.sandwich import Sandwich
from keras_attn.models.xpos import Xpos
from keras_attn.models.albert import Albert
from keras_attn.models.albert_unshared import AlbertUnshared
from keras_attn.models.electra import Electra
from keras_attn.models.tta_encoder import TTAEncoder
from keras_attn.models.gpt import Gpt
from keras_attn.models.gpt2 import Gpt2
from keras_attn.models.gpt2_ml import Gpt2Ml
from keras_attn.models.t5 import T5
from keras_attn.models.t5 import T5V11
from keras_attn.models.t5 import MT5
from keras_attn.models.t5 import T5Encoder
from keras_attn.models.llama import Llama
from keras_attn.models.mistral import Mistral
from keras_attn.models.qwen2 import Qwen2
from keras_attn.models.qwen3 import Qwen3
from keras_attn.models.gemma import Gemma
from keras_attn.models.gemma2 import Gemma2
from keras_attn.models.gemma3 import Gemma3
from keras_attn.models.phi3 import Phi3
from keras_attn.models.modernbert import ModernBert
from keras_attn.models.deberta_v2 import DebertaV2
