"""bert4keras's keyword names for `build_transformer_model`, translated or
refused with what to write instead."""

from keras_attn.models.config_files import ALIASES
from keras_attn.models.transformer_config import FIELDS
from keras_attn.models.config_files import REQUIRED_VALUES

# bert4keras keyword -> this builder's argument of the same meaning.
RENAMED = {
    "config_path": "config",
    "checkpoint_path": "checkpoint",
    "model": "variant",
}

# bert4keras `model=` -> `variant=`. bert4keras's "roberta" is a RoBERTa
# trained in BERT's format (chinese_roberta_wwm_ext, its `BERT` class), so it
# leaves the choice to the config: "bert" for a Google `bert_config.json`,
# "roberta" for a Hugging Face RoBERTa.
MODELS = {
    "bert": "bert",
    "roberta": None,
    "albert": "albert",
    "albert_unshared": "albert_unshared",
    "electra": "electra",
    "roformer": "roformer",
    "roformer_v2": "roformer_v2",
    "nezha": "nezha",
    "gau_alpha": "gau_alpha",
    "gpt": "gpt",
    "gpt2": "gpt2",
    "gpt2_ml": "gpt2_ml",
    "t5": "t5",
    "t5.1.0": "t5",
    "t5.1.1": "t5.1.1",
    "mt5.1.1": "mt5.1.1",
    "t5_encoder": "t5_encoder",
}

# bert4keras `model=` values with no counterpart here.
UNSUPPORTED_MODELS = {
    "t5_decoder": (
        " Build the whole T5 (model='t5', 't5.1.1' or 'mt5.1.1'): model.generate "
        "encodes each source once and decodes with a cache."
    ),
}

# Names users try that bert4keras never had, and what to write instead.
NOT_BERT4KERAS_MODELS = {
    "ernie": (
        " bert4keras has no ERNIE model: ERNIE 1.0 converted to BERT's TensorFlow "
        "format is a BERT (model='bert'); Hugging Face `model_type: ernie` "
        "(ERNIE 3.0, with task-type embeddings) is not read by this builder."
    ),
}

# bert4keras's head keywords -> (application, the activation bert4keras
# applies and keras_attn's logits leave out).
HEAD_KEYWORDS = (
    ("with_mlm", "mlm", "softmax"),
    ("with_discriminator", "discriminator", "sigmoid"),
)

# bert4keras keywords this builder refuses -> what to write instead.
REFUSED = {
    "layer_norm_cond": "conditional_layer_norm=<condition width> (the model then takes the condition as an input)",
    "layer_norm_cond_hidden_size": "conditional_layer_norm=<condition width>",
    "layer_norm_cond_hidden_act": "conditional_layer_norm=<condition width>",
    "additional_input_layers": (
        "conditional_layer_norm=<condition width>, which adds the condition input; "
        "for other inputs, wrap the built model in a keras.Model"
    ),
    "return_keras_model": "nothing: the builder always returns a keras.Model",
    "sequence_length": (
        "nothing: the model takes any length up to max_position_embeddings; for one "
        "fixed length under XLA, pad the batches (keras.utils.pad_sequences)"
    ),
    "ignore_invalid_weights": (
        "skip_missing=[layer names] to leave weights the checkpoint lacks at their "
        "initial values (listed in a warning)"
    ),
    "attention_caches": "model.generate(...), which keeps its own key/value cache",
    "custom_position_ids": "nothing: positions are counted by the model",
    "residual_attention_scores": "not supported",
}


def translation_table():
    """The bert4keras keywords and what to write instead, one per line."""
    lines = [f"    {old}= -> {new}=" for old, new in RENAMED.items()]
    lines.append("    with_mlm=True -> application='mlm' (logits)")
    lines.append("    with_discriminator=True -> application='discriminator' (logits)")
    lines.append("    segment_vocab_size= -> type_vocab_size= (a config override; both work)")
    lines += [f"    {old}= -> {new}" for old, new in REFUSED.items()]
    return "\n".join(lines)


def from_bert4keras(arguments, overrides):
    """Moves bert4keras's keywords out of `overrides` into `arguments` (the
    builder's `config`, `checkpoint`, `variant`, `application`), in place.

    Raises:
        ValueError: a bert4keras keyword given with its counterpart here, a
            bert4keras model with no variant here, a refused keyword, or an
            override that is no config field (each message says what to
            write instead).
    """
    for old, new in RENAMED.items():
        if old not in overrides:
            continue
        value = overrides.pop(old)
        if arguments[new] is not None:
            raise ValueError(
                f"build_transformer_model received both {new}= and bert4keras's "
                f"{old}=, which mean the same; pass only {new}=."
            )
        if old == "model":
            value = _variant_of_model(value)
        arguments[new] = value
    for keyword, application, activation in HEAD_KEYWORDS:
        if keyword not in overrides:
            continue
        value = overrides.pop(keyword)
        if value not in (False, True, "linear"):
            raise ValueError(
                f"{keyword}={value!r}: keras_attn's {application} head returns logits; "
                f"pass application={application!r} (bert4keras's {keyword}=True) and apply "
                f"keras.ops.{activation}, or use a loss with from_logits=True."
            )
        if value and arguments["application"] in (None, "encoder"):
            arguments["application"] = application
    refused = [key for key in overrides if key in REFUSED]
    if refused:
        raise ValueError(
            "build_transformer_model does not take bert4keras's "
            + "; ".join(f"{key}= (write {REFUSED[key]})" for key in refused)
            + "."
        )
    unknown = [
        key
        for key in overrides
        if ALIASES.get(key, key) not in FIELDS and key not in REQUIRED_VALUES
    ]
    if unknown:
        raise ValueError(
            f"Unknown keyword argument(s) {unknown} of build_transformer_model: other "
            "keywords than its own arguments are config overrides, and these are no "
            f"config field (known fields: {sorted(FIELDS)}). bert4keras keywords and "
            f"what to write instead:\n{translation_table()}"
        )


def _variant_of_model(model):
    name = model.lower() if isinstance(model, str) else model
    if name in MODELS:
        return MODELS[name]
    if name in UNSUPPORTED_MODELS:
        raise ValueError(
            f"model={model!r}: bert4keras's {model} is not supported by keras_attn, "
            f"which builds BERT-format models (bert4keras's {sorted(MODELS)}) and "
            f"its own variants (variant=).{UNSUPPORTED_MODELS[name]}"
        )
    raise ValueError(
        f"model={model!r} is not a bert4keras model name this builder knows "
        f"({sorted(MODELS)}); for keras_attn's own variants pass variant=."
        + NOT_BERT4KERAS_MODELS.get(name, "")
    )
