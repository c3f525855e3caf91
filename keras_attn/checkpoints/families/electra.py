"""ELECTRA's checkpoints: BERT's layout, the embeddings projected to the
blocks' width; Google's store the generator and the discriminator side by
side."""

from keras_attn.checkpoints import google_electra
from keras_attn.checkpoints import huggingface_bert
from keras_attn.checkpoints.families.family import ENCODER_REFERENCE
from keras_attn.checkpoints.families.family import CheckpointFamily
from keras_attn.checkpoints.families.family import Marker
from keras_attn.checkpoints.families.family import name_tables

ELECTRA = CheckpointFamily(
    name="electra",
    title="ELECTRA",
    description="ELECTRA's (Google `electra/` names, Hugging Face `model_type: electra`): "
    "BERT's layout, embeddings projected by `embeddings_project`",
    model_types=("electra",),
    # Google's ELECTRA configs name no `model_type`.
    google_format=True,
    default_variant="electra",
    name_tables=name_tables(huggingface_bert.NAME_TABLE, tensorflow=google_electra.BY_APPLICATION),
    markers=(Marker("discriminator_predictions", "'electra'"),),
    references={**ENCODER_REFERENCE, "discriminator": ("ElectraForPreTraining", "logits")},
    architecture_applications={
        "ElectraForPreTraining": "discriminator",
        "ElectraForMaskedLM": "mlm",
    },
    variant_modules=("electra",),
)
