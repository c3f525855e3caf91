"""ELECTRA's checkpoints: BERT's layout, the embeddings projected to the
blocks' width; Google's store the generator and the discriminator side by
side."""

from keras_attn.checkpoints import google_electra
from keras_attn.checkpoints import huggingface_bert
from keras_attn.checkpoints.families.family import CheckpointFamily
from keras_attn.checkpoints.families.family import Marker
from keras_attn.checkpoints.families.family import register_family

ELECTRA = register_family(CheckpointFamily(
    name="electra",
    title="ELECTRA",
    description="ELECTRA's (Google `electra/` names, Hugging Face `model_type: electra`): "
    "BERT's layout, embeddings projected by `embeddings_project`",
    model_types=("electra",),
    # Google's ELECTRA configs name no `model_type`.
    google_format=True,
    default_variant="electra",
    name_tables={
        "tensorflow": google_electra.BY_APPLICATION,
        "safetensors": huggingface_bert,
        "torch": huggingface_bert,
    },
    markers=(Marker("discriminator_predictions", "'electra'"),),
    references={
        "encoder": ("AutoModel", "last_hidden_state"),
        "discriminator": ("ElectraForPreTraining", "logits"),
    },
))
