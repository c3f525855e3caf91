"""GPT2-ML's checkpoints (its TensorFlow release)."""

from keras_attn.checkpoints import bert4keras_gpt
from keras_attn.checkpoints.families.family import CheckpointFamily
from keras_attn.checkpoints.families.family import Marker
from keras_attn.checkpoints.families.family import name_tables

GPT2_ML = CheckpointFamily(
    name="gpt2_ml",
    title="GPT2-ML",
    description="GPT2-ML's (its TensorFlow `newslm/` names)",
    google_format=True,
    name_tables=name_tables(tensorflow=bert4keras_gpt.GPT2_ML),
    markers=(Marker("newslm/", "'gpt2_ml'"),),
    variant_modules=("gpt2_ml",),
)
