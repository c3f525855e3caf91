"""`build_transformer_model`: config and checkpoint in, `keras.Model` out."""

import os
import tempfile
import warnings

import numpy as np

from keras_attn.checkpoints import google_bert
from keras_attn.checkpoints import huggingface_bert
from keras_attn.checkpoints.porting import port_weights
from keras_attn.checkpoints.readers import CheckpointError
from keras_attn.checkpoints.readers import UnusedWeightsWarning
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
    """Makes `variant=name` build `variant_class` (a `Transformer` subclass).
    A subclass of `Roberta` reads RoBERTa checkpoints, any other one BERT
    checkpoints (see `select_variant`)."""
    VARIANTS[name] = variant_class
    return variant_class


def variant_family(variant):
    """The checkpoint family a registered variant reads: `"roberta"` for
    `Roberta` and its subclasses (positions offset past the padding row),
    else `"bert"`."""
    return "roberta" if issubclass(VARIANTS[variant], Roberta) else "bert"


def select_variant(config, variant=None):
    """The variant to build for `config` (a `TransformerConfig`).

    | config says (`checkpoint_family`)        | `variant=None` gives | variants accepted                     |
    |------------------------------------------|----------------------|---------------------------------------|
    | `"roberta"` (HF `model_type` roberta,    | `"roberta"`          | `"roberta"` and `Roberta` subclasses  |
    | xlm-roberta, camembert)                  |                      |                                       |
    | `"bert"` (HF `model_type` bert, any      | `"roberta+"` with    | every other variant: `"bert"`,        |
    | Google `bert_config.json`)               | `attention_key_size` | `"roberta+"`, `"talking_heads"`,      |
    |                                          | or `embedding_size`, | `"tta"`, `"sinusoidal"`, `"roformer"`,|
    |                                          | else `"bert"`        | `"alibi"`, `"kerple_*"`, `"sandwich"`,|
    |                                          |                      | `"xpos"`                              |
    | `None` (a dict without `model_type`)     | as for `"bert"`      | all                                   |

    The BERT-shaped variants start from BERT's weights (those without learned
    positions leave the position table unused, with an
    `UnusedWeightsWarning`). RoBERTa's position table is offset by
    `pad_token_id + 1`, so its checkpoints take `"roberta"` only: any other
    variant would read every position one row off.

    Raises:
        ValueError: an unknown variant, or one the config's family contradicts
            (the message says which variant to use).
    """
    if variant is None:
        if config.checkpoint_family == "roberta":
            return "roberta"
        if config.attention_key_size is not None or config.embedding_size is not None:
            return "roberta+"
        return "bert"
    if variant not in VARIANTS:
        raise ValueError(
            f"Unknown variant {variant!r}; known variants: {sorted(VARIANTS)}."
        )
    family = config.checkpoint_family
    if family is not None and variant_family(variant) != family:
        accepted = sorted(name for name in VARIANTS if variant_family(name) == family)
        raise ValueError(
            f"variant={variant!r} reads {variant_family(variant)} checkpoints, but the "
            f"config is a {family} model (`model_type`/config format); use "
            f"variant={select_variant(config)!r} (or leave `variant` unset). "
            f"Variants for {family} checkpoints: {accepted}."
        )
    return variant


def build_transformer_model(
    config,
    checkpoint=None,
    variant=None,
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
        variant: `None` (the config's family: `"roberta"` for a Hugging Face
            `model_type: roberta`, `"roberta+"` for a config with
            `attention_key_size`/`embedding_size`, else `"bert"`), `"bert"`,
            `"roberta"`, `"roberta+"`, `"talking_heads"`, `"tta"`,
            `"sinusoidal"`, `"roformer"`, `"alibi"`, `"kerple_log"`,
            `"kerple_power"`, `"sandwich"`, `"xpos"`, or a name given to
            `register_variant`. A variant that contradicts the config's
            family is an error; `select_variant` has the table.
        application: `"encoder"` (sequence output), `"mlm"`, `"lm"` or
            `"unilm"` (masked-LM logits under a bidirectional, causal or
            seq2seq mask).
        with_pool: add the pooler (`pooled_output`): `True` for BERT's `tanh`
            dense layer, or a Keras activation name for another.
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
        A `keras_attn.models.TransformerModel` (a functional `keras.Model`
        that checks its inputs) taking a dict with `"token_ids"`,
        `"segment_ids"` (when the config has token types, or for `"unilm"`)
        and, with `padding_mask_input`, `"padding_mask"`. It returns one
        tensor when it has one output, else a dict with the keys
        `"sequence_output"`, `"pooled_output"`, `"nsp_logits"`,
        `"mlm_logits"` it has.

    Example:

    ```python
    model = keras_attn.build_transformer_model(
        "chinese_L-12_H-768_A-12/bert_config.json",
        "chinese_L-12_H-768_A-12/bert_model.ckpt",
        application="mlm",
    )
    ```
    """
    if variant is not None and variant not in VARIANTS:
        raise ValueError(
            f"Unknown variant {variant!r}; known variants: {sorted(VARIANTS)}."
        )
    if checkpoint is None and not isinstance(config, dict) and os.path.isdir(config):
        checkpoint = config
    parsed = load_config(config, **overrides)
    variant = select_variant(parsed, variant)
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
    """Loads a checkpoint of any supported format into a built model (see
    `build_transformer_model` for the formats).

    All variables or none: every name and shape is checked before the first
    assignment, and a failure at any point leaves every variable exactly as
    it was. Checkpoint weights the model does not use are listed in an
    `UnusedWeightsWarning` (optimizer slots, tied duplicates, buffers and the
    heads the model was built without are not).

    Raises:
        CheckpointError: a name missing, a shape that disagrees, a file that
            cannot be read; nothing was loaded.
        FileNotFoundError: nothing readable at `checkpoint`.
    """
    path = os.fspath(checkpoint)
    if path.endswith(".weights.h5"):
        if keep_tokens is not None:
            raise ValueError(
                f"keep_tokens applies to pretrained checkpoints, not to {path!r}, "
                "which already holds this model's own weights."
            )
        _load_weights_file(model, path)
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
            duplicates=huggingface_bert.DUPLICATES,
            keep_tokens=keep_tokens,
        )
    else:
        raise CheckpointError(f"No name table for {reader.format!r} checkpoints ({path!r}).")
    return model


def _h5_datasets(path):
    """Dataset path -> shape of every array in an `.h5` file."""
    import h5py

    shapes = {}
    with h5py.File(path, "r") as file:
        file.visititems(
            lambda name, item: shapes.__setitem__(name, item.shape)
            if isinstance(item, h5py.Dataset)
            else None
        )
    return shapes


def _load_weights_file(model, path):
    """`model.load_weights(path)`, all or nothing, with Keras' own layout.

    Keras stores variables under paths of its choosing (`layers/dense_1/vars/0`,
    by layer class and order, not by layer name), so the file is compared
    with what this model itself writes: a path the model lacks is unused
    (warned), one the file lacks or a shape that differs is an error before
    anything is assigned. Keras then loads; should it still fail (a damaged
    dataset), every variable is restored from a snapshot taken before, so the
    guarantee does not depend on Keras' loading order.
    """
    if not os.path.isfile(path):
        raise FileNotFoundError(f"Weights file {path!r} does not exist.")
    try:
        stored = _h5_datasets(path)
    except OSError as error:
        raise CheckpointError(f"Cannot read weights file {path!r}: {error}") from error
    with tempfile.TemporaryDirectory() as directory:
        own = os.path.join(directory, "model.weights.h5")
        model.save_weights(own)
        expected = _h5_datasets(own)
    missing = sorted(set(expected) - set(stored))
    mismatched = [
        f"{name}: model expects {expected[name]}, file has {stored[name]}"
        for name in sorted(set(expected) & set(stored))
        if tuple(expected[name]) != tuple(stored[name])
    ]
    unused = sorted(set(stored) - set(expected))
    if missing or mismatched:
        sections = [
            ("arrays the model needs and the file lacks", missing),
            ("shapes that disagree (a different config?)", mismatched),
            ("arrays in the file the model has no place for", unused),
        ]
        details = "\n".join(
            f"  {title} ({len(items)}):\n" + "\n".join(f"    {item}" for item in items)
            for title, items in sections
            if items
        )
        raise CheckpointError(
            f"Cannot load {path!r} into model {model.name!r}; nothing was loaded.\n{details}"
        )
    snapshot = [np.array(variable.numpy(), copy=True) for variable in model.weights]
    try:
        model.load_weights(path)
    except BaseException:
        for variable, value in zip(model.weights, snapshot):
            variable.assign(value)
        raise
    if unused:
        warnings.warn(
            UnusedWeightsWarning(
                f"{len(unused)} arrays of {path!r} were not used by model "
                f"{model.name!r} (a larger model's weights?):\n"
                + "\n".join(f"    {name}" for name in unused)
            ),
            stacklevel=3,
        )
