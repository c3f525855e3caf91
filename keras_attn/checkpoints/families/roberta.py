"""RoBERTa's checkpoints: BERT's names, positions offset past the padding
row (so no other variant reads them)."""

from keras_attn.checkpoints.families.bert import BERT
from keras_attn.checkpoints.families.family import CheckpointFamily
from keras_attn.checkpoints.families.family import ENCODER_REFERENCE

ROBERTA = CheckpointFamily(
    name="roberta",
    title="RoBERTa",
    description="RoBERTa's (`model_type: roberta`, `xlm-roberta`, `camembert`): BERT's "
    "names, positions offset past the padding row",
    model_types=("roberta", "xlm-roberta", "camembert"),
    default_variant="roberta",
    name_tables=BERT.name_tables,
    references=ENCODER_REFERENCE,
    variant_modules=("roberta",),
)
