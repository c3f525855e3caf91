"""bert4keras's GPT checkpoints (CDial-GPT)."""

from keras_attn.checkpoints import bert4keras_gpt
from keras_attn.checkpoints.families.family import CheckpointFamily
from keras_attn.checkpoints.families.family import name_tables

GPT = CheckpointFamily(
    name="gpt",
    title="GPT",
    description="bert4keras's GPT (CDial-GPT): BERT's Google names under `gpt/`",
    google_format=True,
    name_tables=name_tables(tensorflow=bert4keras_gpt.GPT),
    variant_modules=("gpt",),
)
