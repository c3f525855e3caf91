"""Checkpoint formats: readers, name tables and the weight-porting helper."""

from keras_attn.checkpoints.readers import CheckpointError
from keras_attn.checkpoints.readers import CheckpointReader
from keras_attn.checkpoints.readers import SkippedWeightsWarning
from keras_attn.checkpoints.readers import UnusedWeightsWarning
from keras_attn.checkpoints.readers import open_checkpoint
