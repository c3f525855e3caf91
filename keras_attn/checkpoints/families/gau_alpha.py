"""GAU-alpha's checkpoints (ZhuiyiTechnology's, Google format)."""

from keras_attn.checkpoints import google_gau_alpha
from keras_attn.checkpoints.families.family import CheckpointFamily
from keras_attn.checkpoints.families.family import name_tables

GAU_ALPHA = CheckpointFamily(
    name="gau_alpha",
    title="GAU-alpha",
    description="GAU-alpha's (ZhuiyiTechnology's Google-format checkpoints): BERT's "
    "embedding names, Gated Attention Units under `GAU_alpha/encoder/`",
    google_format=True,
    name_tables=name_tables(tensorflow=google_gau_alpha.NAME_TABLE),
    variant_modules=("gau_alpha",),
)
