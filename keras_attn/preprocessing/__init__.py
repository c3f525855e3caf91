"""Preprocessing helpers for what Keras' own do not cover."""

from keras_attn.preprocessing.sequence_padding import sequence_padding
