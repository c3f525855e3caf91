"""Preprocessing helpers for what Keras' own do not cover."""

from keras_attn.preprocessing.data_generator import DataGenerator
from keras_attn.preprocessing.sequence_padding import sequence_padding
from keras_attn.preprocessing.text_segmentate import text_segmentate
