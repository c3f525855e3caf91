"""T5's checkpoints: Hugging Face `model_type: t5`/`mt5` and Mesh
TensorFlow's names as bert4keras reads them."""

from keras_attn.checkpoints import huggingface_t5
from keras_attn.checkpoints import mesh_t5
from keras_attn.checkpoints.families.family import CheckpointFamily
from keras_attn.checkpoints.families.family import Marker
from keras_attn.checkpoints.families.family import name_tables

# T5Config's spellings (mT5's are the same).
CONFIG_ALIASES = {
    "d_model": "hidden_size",
    "d_ff": "intermediate_size",
    "d_kv": "attention_head_size",
    "num_layers": "num_layers",
    "num_heads": "num_heads",
    "dropout_rate": "dropout_rate",
    # transformers' T5EncoderModel saves `is_encoder_decoder: false`.
    "is_encoder_decoder": "encoder_only",
}

# Fields of T5 configs that do not change the network this builder makes.
IGNORED_KEYS = frozenset({
    "task_specific_params", "dense_act_fn", "is_gated_act",
    # Initialisation scales, for training from scratch; this builder
    # initialises every model by `initializer_range`.
    "initializer_factor",
})


def prepare_config(values, model_type):
    """A T5 config's `tie_word_embeddings`, read as whether its head is
    v1.0's (the token embedding, on `h * d_model ** -0.5`) or v1.1's (an own
    projection, unscaled). transformers 5 writes `tie_word_embeddings: true`
    for every T5 and says v1.0 by `scale_decoder_outputs`; earlier versions
    say v1.1 by `tie_word_embeddings: false`; mT5 is always v1.1."""
    values = dict(values)
    if model_type == "mt5":
        values.pop("scale_decoder_outputs", None)
        values["tie_word_embeddings"] = False
    elif "scale_decoder_outputs" in values:
        values["tie_word_embeddings"] = values.pop("scale_decoder_outputs") is not False
    return values


def config_defaults(fields):
    fields.setdefault("attention_dropout_rate", fields.get("dropout_rate", 0.1))
    fields.setdefault("segment_vocab_size", 0)
    fields.setdefault("decoder_start_token_id", fields.get("pad_token_id", 0))


def default_variant(config):
    """The encoder alone for `T5EncoderModel`'s config, else v1.0 (tied
    head) or v1.1 (untied)."""
    if config.encoder_only:
        return "t5_encoder"
    return "t5" if config.tie_word_embeddings else "t5.1.1"


def variant_mismatch(config, variant_class):
    """An encoder-decoder variant whose head is tied otherwise than the
    config's."""
    if "seq2seq" in variant_class.applications and variant_class.tied_head != config.tie_word_embeddings:
        return (
            f"has {'a tied' if variant_class.tied_head else 'an untied'} head, but the "
            f"config says tie_word_embeddings={config.tie_word_embeddings}"
        )
    return None


T5 = CheckpointFamily(
    name="t5",
    title="T5",
    description="T5's (Hugging Face `model_type: t5`/`mt5`, Mesh TensorFlow names as "
    "bert4keras reads them)",
    model_types=("t5", "mt5"),
    google_format=True,
    config_aliases=CONFIG_ALIASES,
    prepare_config=prepare_config,
    config_defaults=config_defaults,
    ignored_keys=IGNORED_KEYS,
    default_variant=default_variant,
    variant_mismatch=variant_mismatch,
    name_tables=name_tables(huggingface_t5.NAME_TABLE, tensorflow=mesh_t5.NAME_TABLE),
    markers=(Marker("EncDecAttention", "'t5', 't5.1.1' or 'mt5.1.1'"),),
    # T5's `AutoModel` is the encoder-decoder without its head; its encoder
    # alone is `T5EncoderModel`, mT5's `MT5EncoderModel`.
    references={
        "seq2seq": ("AutoModelForSeq2SeqLM", "logits"),
        "encoder": ("T5EncoderModel", "last_hidden_state"),
    },
    reference_overrides={"encoder": {"mt5": "MT5EncoderModel"}},
    variant_modules=("t5",),
)
