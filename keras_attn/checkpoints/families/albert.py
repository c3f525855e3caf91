"""ALBERT's checkpoints: BERT's names with one shared block and factorised
embeddings."""

from keras_attn.checkpoints.families.bert import BERT
from keras_attn.checkpoints.families.family import CheckpointFamily
from keras_attn.checkpoints.families.family import ENCODER_REFERENCE

# Fields only ALBERT configs have: a Google `albert_config.json` (which names
# no `model_type`) holding one is an ALBERT checkpoint.
ALBERT_FIELDS = ("num_hidden_groups", "inner_group_num")

ALBERT = CheckpointFamily(
    name="albert",
    title="ALBERT",
    description="ALBERT's (Google `albert_config.json`, `model_type: albert`): "
    "factorised embeddings, one shared block",
    model_types=("albert",),
    recognises_config=lambda values: any(key in values for key in ALBERT_FIELDS),
    default_variant="albert",
    name_tables=BERT.name_tables,
    references=ENCODER_REFERENCE,
    variant_modules=("albert", "albert_unshared"),
)
