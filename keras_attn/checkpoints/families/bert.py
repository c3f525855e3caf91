"""BERT's checkpoints: Google's `bert_model.ckpt` and Hugging Face
`model_type: bert`; also what a Google-format config without a family of its
own is read as."""

from keras_attn.checkpoints import google_bert
from keras_attn.checkpoints import huggingface_bert
from keras_attn.checkpoints.families.family import ENCODER_REFERENCE
from keras_attn.checkpoints.families.family import CheckpointFamily
from keras_attn.checkpoints.families.family import Marker
from keras_attn.checkpoints.families.family import name_tables


def default_variant(config):
    """RoBERTa+ for a config with its own query/key or embedding width,
    else BERT."""
    if config.attention_key_size is not None or config.embedding_size is not None:
        return "roberta+"
    return "bert"


BERT = CheckpointFamily(
    name="bert",
    title="BERT",
    description="BERT's names and layout (Google `bert_model.ckpt`, Hugging Face "
    "`model_type: bert`); positions from row 0",
    model_types=("bert",),
    google_format=True,
    default_variant=default_variant,
    name_tables=name_tables(huggingface_bert.NAME_TABLE, tensorflow=google_bert.NAME_TABLE),
    markers=(
        Marker("bert.encoder.layer.", "'bert'", kind="prefixed"),
        Marker("bert/encoder/layer_", "'bert'", kind="prefixed"),
        # The blocks of every Hugging Face BERT-layout model (RoFormer's too).
        Marker("encoder.layer.", "'bert' or 'roberta'", kind="shared"),
    ),
    references=ENCODER_REFERENCE,
    variant_modules=("bert",),
)
