"""Attention layers and the building blocks of the model builder."""

from keras_attn.layers.alibi_bias import ALiBiBias
from keras_attn.layers.attention_mask import AttentionMask
from keras_attn.layers.bias_add import BiasAdd
from keras_attn.layers.conditional_layer_normalization import ConditionalLayerNormalization
from keras_attn.layers.conditional_random_field import ConditionalRandomField
from keras_attn.layers.efficient_global_pointer import EfficientGlobalPointer
from keras_attn.layers.feed_forward import FeedForward
from keras_attn.layers.global_pointer import GlobalPointer
from keras_attn.layers.kerple_bias import KerpleBias
from keras_attn.layers.key_value_cache import CacheStep
from keras_attn.layers.key_value_cache import KeyValueCache
from keras_attn.layers.local_mask_baseline import LocalMaskBaseline
from keras_attn.layers.multi_head_attention import MultiHeadAttention
from keras_attn.layers.output_mask import OutputMask
from keras_attn.layers.position_embedding import PositionEmbedding
from keras_attn.layers.relative_position_bias import RelativePositionBias
from keras_attn.layers.rotary_embedding import RotaryEmbedding
from keras_attn.layers.sandwich_bias import SandwichBias
from keras_attn.layers.sinusoidal_position_embedding import SinusoidalPositionEmbedding
from keras_attn.layers.talking_heads_attention import TalkingHeadsAttention
from keras_attn.layers.token_embedding import TokenEmbedding
