"""Attention layers."""

from keras_attn.layers.multi_head_attention import MultiHeadAttention
from keras_attn.layers.talking_heads_attention import TalkingHeadsAttention
