"""NEZHA's checkpoints: BERT's names, functional relative positions (no
position table)."""

from keras_attn.checkpoints import google_bert
from keras_attn.checkpoints.families.family import CheckpointFamily
from keras_attn.checkpoints.families.family import name_tables

NEZHA = CheckpointFamily(
    name="nezha",
    title="NEZHA",
    description="NEZHA's (Google `bert_config.json` with `use_relative_position`, "
    "`model_type: nezha`): BERT's names, no position table",
    model_types=("nezha",),
    google_format=True,
    # NEZHA's bert_config.json names no model type but says this.
    recognises_config=lambda values: values.get("use_relative_position") is True,
    default_variant="nezha",
    name_tables=name_tables(tensorflow=google_bert.NAME_TABLE),
    variant_modules=("nezha",),
)
