"""RoFormer's checkpoints: BERT's names, rotary positions (no position
table)."""

from keras_attn.checkpoints import google_bert
from keras_attn.checkpoints import huggingface_roformer
from keras_attn.checkpoints.families.family import CheckpointFamily
from keras_attn.checkpoints.families.family import Marker
from keras_attn.checkpoints.families.family import name_tables

ROFORMER = CheckpointFamily(
    name="roformer",
    title="RoFormer",
    description="RoFormer's (Hugging Face `model_type: roformer`, bert4keras's "
    "Google-format RoFormer and RoFormer-v2): BERT's names, no position table",
    model_types=("roformer",),
    google_format=True,
    default_variant="roformer",
    name_tables=name_tables(huggingface_roformer.NAME_TABLE, tensorflow=google_bert.NAME_TABLE),
    markers=(Marker("roformer.encoder.layer.", "'roformer'", kind="prefixed"),),
    variant_modules=("roformer", "roformer_v2"),
)
