"""`build_transformer_model`: config and checkpoint in, `keras.Model` out."""

import os

from keras_attn.checkpoints import google_bert
from keras_attn.checkpoints import huggingface_bert
from keras_attn.checkpoints.porting import port_weights
from keras_attn.checkpoints.readers import CheckpointError
from keras_attn.checkpoints.readers import open_checkpoint
from keras_attn.models.alibi import Alibi
from keras_attn.models.bert import Bert
from keras_attn.models.kerple import KerpleLog
from keras_attn.models.kerple import KerplePower
from keras_attn.models.roberta import Roberta
from keras_attn.models.roberta_plus import RobertaPlus
from keras_attn.models.roformer import Roformer
from keras_attn.models.sandwich import Sandwich
from keras_attn.models.sinusoidal import SinusoidalBert
from keras_attn.models.talking_heads import TalkingHeadsBert
from keras_attn.models.tta import Tta
from keras_attn.models.xpos import Xpos
from keras_attn.models.transformer_config import load_config

VARIANTS = {
    "bert": Bert,
    "roberta": Roberta,
    "roberta+": RobertaPlus,
    "talking_heads": TalkingHeadsBert,
    "tta": Tta,
    "sinusoidal": SinusoidalBert,
    "roformer": Roformer,
    "alibi": Alibi,
    "kerple_log": KerpleLog,
    "kerple_power": KerplePower,
    "sandwich": Sandwich,
    "xpos": Xpos,
}


def register_variant(name, variant_class):
    """Makes `variant=name` build `variant_class` (a `Transformer` subclass)."""
    VARIANTS[name] = variant_class
    return variant_class


def build_transformer_model(
    config,
    checkpoint=None,
    variant="bert",
    application="encoder",
    with_pool=False,
    with_nsp=False,
    keep_tokens=None,
    padding_mask_input=False,
    name=None,
    **overrides,
):
    """Builds a BERT-family model and loads its weights.

    Args:
        config: a Google `bert_config.json`, a Hugging Face `config.json`, a
            directory holding either (with `checkpoint=None` the weights in
            that directory are loaded too), or a dict.
        checkpoint: a TensorFlow checkpoint prefix (`.../bert_model.ckpt`), a
            Hugging Face directory, `.safetensors` or `.bin` file, or a
            `.weights.h5` saved by this library. `None` leaves the weights
            randomly initialised (unless `config` is a directory).
        variant: `"bert"`, `"roberta"`, `"roberta+"`, `"talking_heads"`,
            `"tta"`, `"sinusoidal"`, `"roformer"`, `"alibi"`, `"kerple_log"`,
            `"kerple_power"`, `"sandwich"`, `"xpos"`, or a name given to
            `register_variant`.
        application: `"encoder"` (sequence output), `"mlm"`, `"lm"` or
            `"unilm"` (masked-LM logits under a bidirectional, causal or
            seq2seq mask).
        with_pool: add the pooler (`pooled_output`).
        with_nsp: add the next-sentence head (`nsp_logits`; implies the pooler).
        keep_tokens: vocabulary ids to keep, in order: the token embedding and
            the masked-LM bias keep only these rows, and `vocab_size` becomes
            `len(keep_tokens)`.
        padding_mask_input: take an explicit `padding_mask` input (1 for real
            tokens) instead of deriving padding from `pad_token_id`.
        name: name of the returned model.
        **overrides: config fields to replace, e.g. `dropout_rate=0.0`; an
            unknown field is an error. Inference-time options go here too:
            `attention_window=512` (the LocalMaskBaseline window, any variant)
            and `log_n_train_length=512` (log-n scaling).

    Returns:
        A `keras.Model` taking a dict with `"token_ids"`, `"segment_ids"`
        (when the config has token types, or for `"unilm"`) and, with
        `padding_mask_input`, `"padding_mask"`. It returns one tensor when it
        has one output, else a dict with the keys `"sequence_output"`,
        `"pooled_output"`, `"nsp_logits"`, `"mlm_logits"` it has.

    Example:

    ```python
    model = keras_attn.build_transformer_model(
        "chinese_L-12_H-768_A-12/bert_config.json",
        "chinese_L-12_H-768_A-12/bert_model.ckpt",
        application="mlm",
    )
    ```
    """
    if variant not in VARIANTS:
        raise ValueError(
            f"Unknown variant {variant!r}; known variants: {sorted(VARIANTS)}."
        )
    if checkpoint is None and not isinstance(config, dict) and os.path.isdir(config):
        checkpoint = config
    parsed = load_config(config, **overrides)
    if keep_tokens is not None:
        keep_tokens = [int(i) for i in keep_tokens]
        parsed = parsed.replace(vocab_size=len(keep_tokens))
    model = VARIANTS[variant](
        parsed,
        application=application,
        with_pool=with_pool,
        with_nsp=with_nsp,
        padding_mask_input=padding_mask_input,
    ).build(name=name)
    if checkpoint is not None:
        load_checkpoint(model, checkpoint, keep_tokens=keep_tokens)
    return model


def load_checkpoint(model, checkpoint, keep_tokens=None):
    """Loads a checkpoint of any supported format into a built model, all
    variables or none (see `build_transformer_model` for the formats)."""
    path = os.fspath(checkpoint)
    if path.endswith(".weights.h5"):
        if keep_tokens is not None:
            raise ValueError(
                f"keep_tokens applies to pretrained checkpoints, not to {path!r}, "
                "which already holds this model's own weights."
            )
        if not os.path.isfile(path):
            raise FileNotFoundError(f"Weights file {path!r} does not exist.")
        model.load_weights(path)
        return model
    reader = open_checkpoint(path)
    if reader.format == "tensorflow":
        port_weights(
            model,
            reader,
            google_bert.TABLE,
            ignored=google_bert.IGNORED,
            keep_tokens=keep_tokens,
        )
    elif reader.format in ("safetensors", "torch"):
        port_weights(
            model,
            reader,
            huggingface_bert.TABLE,
            candidates=huggingface_bert.candidates,
            ignored=huggingface_bert.IGNORED,
            keep_tokens=keep_tokens,
        )
    else:
        raise CheckpointError(f"No name table for {reader.format!r} checkpoints ({path!r}).")
    return model
