"""Losses."""

from keras_attn.losses.token_cross_entropy import TokenCrossEntropy
