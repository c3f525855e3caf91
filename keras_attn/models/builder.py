"""`build_transformer_model`: config and checkpoint in, `keras.Model` out."""

import os

from keras_attn.checkpoints import families
from keras_attn.checkpoints.loading import load_checkpoint
from keras_attn.checkpoints.porting import compound_token_groups
from keras_attn.layers.multi_head_attention import ROTARY_ENCODINGS
from keras_attn.models.bert4keras_names import from_bert4keras
from keras_attn.models.registry import VARIANTS
from keras_attn.models.config_files import load_config


def variant_family(variant):
    """The checkpoint family a registered variant reads: its class's
    `checkpoint_family` (`"roberta"`, `"albert"`, ..., else `"bert"`)."""
    return VARIANTS[variant].checkpoint_family


def select_variant(config, variant=None):
    """The variant to build for `config` (a `TransformerConfig`).

    `variant=None` gives the family's own variant (`checkpoint_family`, read
    from a Hugging Face `model_type` or a Google config): `"roberta"` for
    RoBERTa, XLM-R and CamemBERT, `"albert"`, `"electra"`, `"roformer"`,
    `"nezha"`, `"t5"` (`"t5.1.1"` for an untied head, `"t5_encoder"` for
    `T5EncoderModel`), ...; for BERT configs and dicts without `model_type`
    `"roberta+"` when the config has `attention_key_size` or
    `embedding_size`, else `"bert"`. A given variant must read the config's
    family: RoBERTa's positions are offset by `pad_token_id + 1`, so another
    variant would read every position one row off. BERT-shaped variants
    without learned positions leave BERT's table unused (an
    `UnusedWeightsWarning`).

    Raises:
        ValueError: an unknown variant, or one the config's family contradicts
            (the message says which variant to use).
    """
    if variant is None:
        return families.default_variant(config)
    if variant not in VARIANTS:
        raise ValueError(
            f"Unknown variant {variant!r}; known variants: {sorted(VARIANTS)}."
        )
    family = config.checkpoint_family
    readable = families.readable_families(family)
    if family is not None and variant_family(variant) not in readable:
        accepted = sorted(name for name in VARIANTS if variant_family(name) in readable)
        raise ValueError(
            f"variant={variant!r} reads {variant_family(variant)} checkpoints, but the "
            f"config is a {family} model (`model_type`/config format); use "
            f"variant={select_variant(config)!r} (or leave `variant` unset). "
            f"Variants for {family} checkpoints: {accepted}."
        )
    variant_class = VARIANTS[variant]
    if config.encoder_only and "seq2seq" in variant_class.applications:
        raise ValueError(
            f"variant={variant!r} builds an encoder-decoder, but the config says "
            "is_encoder_decoder=false (a checkpoint of the encoder alone, as "
            "transformers' T5EncoderModel saves it); use variant='t5_encoder' (or "
            "leave `variant` unset)."
        )
    if family in variant_class.refused_config_families:
        raise ValueError(
            f"variant={variant!r} cannot read this {family} config: "
            f"{variant_class.refused_config_families[family]}; use "
            f"variant={select_variant(config)!r} (or leave `variant` unset)."
        )
    mismatch = families.variant_mismatch(config, variant_class)
    if mismatch:
        raise ValueError(
            f"variant={variant!r} {mismatch}; use variant={select_variant(config)!r} "
            "(or leave `variant` unset)."
        )
    return variant


def default_application(config, variant):
    """The application a config builds when none is given: "lm" for a causal
    decoder's checkpoint (`is_decoder`, as transformers' BertLMHeadModel
    saves it), else the variant's first.

    Raises:
        ValueError: a decoder's config for a variant without "lm".
    """
    applications = VARIANTS[variant].applications
    if not config.is_decoder:
        return applications[0]
    if "lm" not in applications:
        raise ValueError(
            f"The config sets is_decoder=True (a causal decoder's checkpoint, built "
            f"with application='lm'), but variant={variant!r} builds only "
            f"{list(applications)}; pass one of them as `application` to read the "
            "weights that way."
        )
    return "lm"


def build_transformer_model(
    config=None,
    checkpoint=None,
    variant=None,
    application=None,
    with_pool=False,
    with_nsp=False,
    keep_tokens=None,
    compound_tokens=None,
    padding_mask_input=False,
    skip_missing=None,
    conditional_layer_norm=None,
    conditional_layer_norm_hidden_size=None,
    conditional_layer_norm_activation="linear",
    prefix=None,
    name=None,
    **overrides,
):
    """Builds a Transformer of any registered variant and loads its weights.

    Args:
        config: a Google `bert_config.json`, a Hugging Face `config.json`, a
            directory holding either (with `checkpoint=None` the weights in
            that directory are loaded too), or a dict.
        checkpoint: a TensorFlow checkpoint prefix (`.../bert_model.ckpt`), a
            Hugging Face directory, `.safetensors` or `.bin` file, or a
            `.weights.h5` saved by this library. `None` leaves the weights
            randomly initialised (unless `config` is a directory).
        variant: the architecture, a registered name: the BERT encoders
            `"bert"`, `"roberta"`, `"roberta+"`, `"talking_heads"`, `"tta"`,
            `"albert"`, `"albert_unshared"`, `"electra"`, `"nezha"`,
            `"modernbert"`, `"deberta_v2"`; BERT with other positions
            `"sinusoidal"`, `"roformer"`, `"roformer_v2"`, `"alibi"`,
            `"kerple_log"`, `"kerple_power"`, `"sandwich"`, `"xpos"`; GAU
            blocks `"gau_alpha"`; the decoders `"gpt"`, `"gpt2"`,
            `"gpt2_ml"`, `"llama"`, `"mistral"`, `"qwen2"`, `"qwen3"`,
            `"gemma"`, `"gemma2"`, `"gemma3"`, `"phi3"`; T5 `"t5"`,
            `"t5.1.1"`, `"mt5.1.1"` and its encoder `"t5_encoder"`; or a name
            given to `keras_attn.register_variant`. `None`: the config's
            family decides (see `select_variant`); a variant that
            contradicts it is an error.
        application: what the model outputs, one of the variant's
            `applications` (the first is the default): `"encoder"` (sequence
            output), `"mlm"`, `"lm"` or `"unilm"` (masked-LM logits under a
            bidirectional, causal or seq2seq mask), `"discriminator"`
            (ELECTRA's logits, `(batch, length)`), `"seq2seq"` (an
            encoder-decoder's decoder logits). None: `"lm"` for a config with
            `is_decoder: true`, else the variant's first.
        with_pool: add the pooler (`pooled_output`): `True` for BERT's `tanh`
            dense layer, or a Keras activation name for another.
        with_nsp: add the next-sentence head (`nsp_logits`; implies the pooler).
        keep_tokens: vocabulary ids to keep, in order: the token embedding and
            the masked-LM bias keep only these rows, and `vocab_size` becomes
            `len(keep_tokens)`.
        compound_tokens: groups of vocabulary ids (after `keep_tokens`), one
            per new token: each new token's embedding, masked-LM bias and
            untied decoder entry is the mean of its group's (bert4keras's
            `compound_tokens`). An empty group or an id outside the
            vocabulary is a ValueError.
        padding_mask_input: take an explicit `padding_mask` input (1 for real
            tokens) instead of deriving padding from `pad_token_id`.
        skip_missing: layer names or patterns (`["MLM-*"]`) of weights that
            may keep their initial values when the checkpoint lacks them,
            listed in a `SkippedWeightsWarning`; otherwise a missing weight is
            an error.
        conditional_layer_norm: `None`, or the width of a float input
            `"condition"` `(batch, width)` that modulates the scale and shift
            of every LayerNorm (`keras_attn.layers.ConditionalLayerNormalization`,
            zero-initialised; bert4keras's `layer_norm_cond`).
        conditional_layer_norm_hidden_size: optional width of a dense layer
            applied to the condition inside each LayerNorm.
        conditional_layer_norm_activation: that layer's activation.
        prefix: a string put before every layer name (`"Successor-"`), so
            that two models from one checkpoint can share a functional graph
            (BERT-of-Theseus). The checkpoint is read as without it. Not for
            the T5 variants.
        name: name of the returned model.
        **overrides: config fields to replace, e.g. `dropout_rate=0.0`; an
            unknown field is an error. Inference options go here too:
            `attention_window=512`, `log_n_train_length=512` and
            `hierarchical_position=True` or an alpha in `(0, 1)` (see
            `keras_attn.layers.PositionEmbedding`).

    bert4keras's keywords are accepted too (`config_path=`,
    `checkpoint_path=`, `model=`, `with_mlm=True`, `with_discriminator=True`,
    which returns logits); giving one with its counterpart, or a bert4keras
    keyword this builder lacks, is an error saying what to write instead.

    Returns:
        A `keras_attn.models.TransformerModel` taking a dict with
        `"token_ids"`, `"segment_ids"` (when the config has token types, or
        for `"unilm"`), and `"padding_mask"` or `"condition"` when asked for;
        or the list `[token_ids, segment_ids(, padding_mask)]`. It returns one
        tensor for one output, else a dict of `"sequence_output"`,
        `"pooled_output"`, `"nsp_logits"`, `"mlm_logits"`,
        `"discriminator_logits"`. Sequence outputs carry a Keras mask, false
        at padding.

    Example:

    ```python
    model = keras_attn.build_transformer_model(
        "chinese_L-12_H-768_A-12/bert_config.json",
        "chinese_L-12_H-768_A-12/bert_model.ckpt",
        application="mlm",
    )
    ```
    """
    arguments = dict(config=config, checkpoint=checkpoint, variant=variant, application=application)
    from_bert4keras(arguments, overrides)
    config, checkpoint, variant, application = arguments.values()
    if config is None:
        raise ValueError("build_transformer_model needs a `config` (bert4keras: `config_path`).")
    if variant is not None and variant not in VARIANTS:
        raise ValueError(
            f"Unknown variant {variant!r}; known variants: {sorted(VARIANTS)}."
        )
    if checkpoint is None and not isinstance(config, dict) and os.path.isdir(config):
        checkpoint = config
    parsed = load_config(config, **overrides)
    variant = select_variant(parsed, variant)
    if VARIANTS[variant].position_encoding in ROTARY_ENCODINGS:
        # Named by the config's fields here, not by the layer's `key_size`.
        parsed.check_rotary_width(f"variant={variant!r} (rotary positions)")
    if keep_tokens is not None:
        keep_tokens = [int(i) for i in keep_tokens]
        parsed = parsed.replace(vocab_size=len(keep_tokens))
    if compound_tokens is not None:
        compound_tokens = compound_token_groups(compound_tokens, parsed.vocab_size)
        parsed = parsed.replace(vocab_size=parsed.vocab_size + len(compound_tokens))
    if application is None:
        application = default_application(parsed, variant)
    model = VARIANTS[variant](
        parsed,
        application=application,
        with_pool=with_pool,
        with_nsp=with_nsp,
        padding_mask_input=padding_mask_input,
        conditional_layer_norm=conditional_layer_norm,
        conditional_layer_norm_hidden_size=conditional_layer_norm_hidden_size,
        conditional_layer_norm_activation=conditional_layer_norm_activation,
        **({"prefix": prefix} if prefix else {}),
    ).build(name=name)
    if checkpoint is not None:
        load_checkpoint(
            model,
            checkpoint,
            keep_tokens=keep_tokens,
            skip_missing=skip_missing,
            compound_tokens=compound_tokens,
        )
    elif skip_missing is not None:
        raise ValueError("skip_missing applies when a checkpoint is loaded; none was given.")
    return model
