"""GPT-2's checkpoints: Hugging Face `model_type: gpt2` and bert4keras's
converted GPT-2 (`gpt/` names with `input/LayerNorm`)."""

from keras_attn.checkpoints import bert4keras_gpt
from keras_attn.checkpoints import huggingface_gpt2
from keras_attn.checkpoints.families.family import ENCODER_REFERENCE
from keras_attn.checkpoints.families.family import CheckpointFamily
from keras_attn.checkpoints.families.family import LM_REFERENCE
from keras_attn.checkpoints.families.family import Marker
from keras_attn.checkpoints.families.family import name_tables

# GPT2Config's spellings (its `attribute_map` and more).
CONFIG_ALIASES = {
    "n_embd": "hidden_size",
    "n_layer": "num_layers",
    "n_head": "num_heads",
    "n_positions": "max_position",
    "n_inner": "intermediate_size",
    "activation_function": "hidden_act",
    "resid_pdrop": "dropout_rate",
    "attn_pdrop": "attention_dropout_rate",
    "embd_pdrop": "embedding_dropout_rate",
    "n_ctx": "max_position",
    "scale_attn_by_inverse_layer_idx": "inverse_layer_attention_scale",
}

# Fields of GPT-2 configs that do not change the network this builder makes.
IGNORED_KEYS = frozenset({
    # The task heads' summary options, generation settings.
    "summary_activation", "summary_first_dropout", "summary_proj_to_labels",
    "summary_type", "summary_use_proj", "task_specific_params", "n_special",
    "predict_special_tokens",
    # Dropout of the embeddings; this builder uses `dropout_rate` there.
    "embd_pdrop",
    # Scale the queries before the product and take the scores and the
    # softmax in float32 under autocast. The same scores in float32
    # (transformers itself reads it only in its eager attention); under a
    # mixed-precision policy this library's kernel keeps its own dtypes.
    "reorder_and_upcast_attn",
})


def prepare_config(values, model_type):
    """`n_inner: null` is `4 * n_embd`, set by `config_defaults`."""
    if "n_inner" in values and values["n_inner"] is None:
        values = {key: value for key, value in values.items() if key != "n_inner"}
    return values


def config_defaults(fields):
    fields.setdefault("intermediate_size", 4 * fields.get("hidden_size", 0) or None)
    # GPT-2's vocabulary has no padding token (`<|endoftext|>` ends text).
    fields.setdefault("pad_token_id", None)
    fields.setdefault("segment_vocab_size", 0)


GPT2 = CheckpointFamily(
    name="gpt2",
    title="GPT-2",
    description="GPT-2's (Hugging Face `model_type: gpt2`, bert4keras's `gpt/` names "
    "with `input/LayerNorm`)",
    model_types=("gpt2",),
    google_format=True,
    config_aliases=CONFIG_ALIASES,
    prepare_config=prepare_config,
    config_defaults=config_defaults,
    # The released models' value, and the only one this builder reads.
    required_values={"scale_attn_weights": True},
    ignored_keys=IGNORED_KEYS,
    default_variant="gpt2",
    name_tables=name_tables(huggingface_gpt2.NAME_TABLE, tensorflow=bert4keras_gpt.GPT2),
    markers=(Marker("attn.c_attn", "'gpt2'"),),
    references={**LM_REFERENCE, **ENCODER_REFERENCE},
    variant_modules=("gpt2",),
)
