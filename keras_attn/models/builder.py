"""`build_transformer_model`: config and checkpoint in, `keras.Model` out."""

import os

from keras_attn.checkpoints import families
from keras_attn.checkpoints.loading import load_checkpoint
from keras_attn.checkpoints.porting import compound_token_groups
from keras_attn.layers.multi_head_attention import ROTARY_ENCODINGS
from keras_attn.models.bert4keras_names import from_bert4keras
from keras_attn.models.registry import VARIANTS
from keras_attn.models.transformer_config import load_config


def variant_family(variant):
    """The checkpoint family a registered variant reads: its class's
    `checkpoint_family` (`"roberta"` for `Roberta` and its subclasses,
    whose positions are offset past the padding row, else `"bert"`)."""
    return VARIANTS[variant].checkpoint_family


def select_variant(config, variant=None):
    """The variant to build for `config` (a `TransformerConfig`).

    | config says (`checkpoint_family`)        | `variant=None` gives | variants accepted                     |
    |------------------------------------------|----------------------|---------------------------------------|
    | `"roberta"` (HF `model_type` roberta,    | `"roberta"`          | `"roberta"` and variants whose        |
    |                                          |                      | `checkpoint_family` is `"roberta"`    |
    | xlm-roberta, camembert)                  |                      |                                       |
    | `"bert"` (HF `model_type` bert, any      | `"roberta+"` with    | every other variant: `"bert"`,        |
    | Google `bert_config.json`)               | `attention_key_size` | `"roberta+"`, `"talking_heads"`,      |
    |                                          | or `embedding_size`, | `"tta"`, `"sinusoidal"`, `"roformer"`,|
    |                                          | else `"bert"`        | `"alibi"`, `"kerple_*"`, `"sandwich"`,|
    |                                          |                      | `"xpos"`, `"gau_alpha"`, `"electra"`  |
    |                                          |                      | (Google ELECTRA                       |
    |                                          |                      | configs name no `model_type`)         |
    | `"albert"` (HF `model_type` albert, a    | `"albert"`           | `"albert"`, `"albert_unshared"` and   |
    | Google `albert_config.json`)             |                      | variants whose `checkpoint_family` is |
    |                                          |                      | `"albert"`                            |
    | `"electra"` (HF `model_type` electra)    | `"electra"`          | `"electra"`                           |
    | `"roformer"` (HF `model_type` roformer)  | `"roformer"`         | `"roformer"` (transformers' RoFormer  |
    |                                          |                      | is v1: `"roformer_v2"` is refused)    |
    | `"nezha"` (`model_type` nezha, a Google  | `"nezha"`            | `"nezha"`                             |
    | config with `use_relative_position`)     |                      |                                       |
    | `"t5"` (HF `model_type` t5, mt5)         | `"t5"` (tied head),  | the T5 variants; `"t5_encoder"` only  |
    |                                          | `"t5.1.1"` (untied), | for `is_encoder_decoder: false`       |
    |                                          | `"t5_encoder"` for   | (`T5EncoderModel`)                    |
    |                                          | `T5EncoderModel`     |                                       |
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
    """The application a config builds when none is given: "lm" for a
    causal decoder's checkpoint (`is_decoder`, as Hugging Face's
    BertLMHeadModel saves it: its weights are those of a BERT, trained
    under a causal mask), else the variant's first.

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

    The variants are BERT and its relatives (RoBERTa, ALBERT, ELECTRA,
    NEZHA, RoFormer, ModernBERT, DeBERTa-v2/v3, and BERT with other
    position encodings or attention), the GPTs and LLaMA-style decoders,
    and T5: the `variant` argument lists them all.

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
            `"modernbert"`, `"deberta_v2"`; BERT with other positions `"sinusoidal"`,
            `"roformer"`, `"roformer_v2"`, `"alibi"`, `"kerple_log"`,
            `"kerple_power"`, `"sandwich"`, `"xpos"`; GAU blocks
            `"gau_alpha"`; the decoders `"gpt"`, `"gpt2"`, `"gpt2_ml"`,
            `"llama"`, `"mistral"`, `"qwen2"`, `"qwen3"`, `"gemma"`,
            `"gemma2"`, `"gemma3"`, `"phi3"`; T5 `"t5"`,
            `"t5.1.1"`, `"mt5.1.1"` and its encoder `"t5_encoder"`; or a name
            given to `keras_attn.register_variant` (see
            `keras_attn.Transformer` for writing one). `None`: the config's
            family decides (`"roberta"` for a Hugging Face
            `model_type: roberta`, `"roberta+"` for a config with
            `attention_key_size`/`embedding_size`, the family's own variant
            for the other `model_type`s, else `"bert"`). A variant that
            contradicts the config's family is an error; `select_variant`
            has the table.
        application: what the model outputs, one the variant builds (its
            `applications`; the first is the default): `"encoder"`
            (sequence output), `"mlm"`, `"lm"` or `"unilm"` (masked-LM
            logits under a bidirectional, causal or seq2seq mask),
            `"discriminator"` (ELECTRA's replaced-token logits,
            `(batch, length)`), `"seq2seq"` (an encoder-decoder's decoder
            logits). None: `"lm"` for a config with `is_decoder: true`
            (Hugging Face's BertLMHeadModel), else the variant's first.
        with_pool: add the pooler (`pooled_output`): `True` for BERT's `tanh`
            dense layer, or a Keras activation name for another.
        with_nsp: add the next-sentence head (`nsp_logits`; implies the pooler).
        keep_tokens: vocabulary ids to keep, in order: the token embedding and
            the masked-LM bias keep only these rows, and `vocab_size` becomes
            `len(keep_tokens)`.
        compound_tokens: groups of vocabulary ids (ids after `keep_tokens`),
            one per new token: the vocabulary grows by
            `len(compound_tokens)`, and the new token's entry in the token
            embedding, the masked-LM bias and an untied decoder is the mean
            of its group's entries in the checkpoint (bert4keras's
            `compound_tokens`; e.g. `[[id_of_beijing]]` for a new
            `Beijing`). Without a checkpoint only the vocabulary grows.
            An empty group or an id outside the vocabulary is a ValueError.
        padding_mask_input: take an explicit `padding_mask` input (1 for real
            tokens) instead of deriving padding from `pad_token_id`.
        skip_missing: layer names or patterns (`["MLM-*"]`) of weights that
            may keep their initial values when the checkpoint lacks them,
            e.g. an encoder-only checkpoint loaded into an `"mlm"` model;
            they are listed in a `SkippedWeightsWarning` (see
            `load_checkpoint`). Without it a missing weight is an error.
        conditional_layer_norm: `None`, or the width of a float input
            `"condition"` `(batch, width)` that modulates the scale and shift
            of every LayerNorm (a
            `keras_attn.layers.ConditionalLayerNormalization`, zero-initialised
            so that the loaded model computes what the checkpoint does until
            trained): bert4keras's `layer_norm_cond` plus
            `additional_input_layers`. `generate` takes the condition in dict
            prompts: `{"token_ids": ..., "condition": ...}`.
        conditional_layer_norm_hidden_size: optional width of a dense layer
            applied to the condition inside each LayerNorm (bert4keras's
            `layer_norm_cond_hidden_size`).
        conditional_layer_norm_activation: that layer's activation
            (bert4keras's `layer_norm_cond_hidden_act`).
        prefix: a string put before every layer name (`"Successor-"` gives
            `Successor-Embedding-Token`, `Successor-Transformer-0-...`), so
            that two models from one checkpoint can share a functional graph
            (BERT-of-Theseus; bert4keras's `prefix`). The checkpoint is read
            as without it, the inputs keep their names, `.keras` files keep
            it. Not for the T5 variants.
        name: name of the returned model.
        **overrides: config fields to replace, e.g. `dropout_rate=0.0`; an
            unknown field is an error. Inference-time options go here too:
            `attention_window=512` (the LocalMaskBaseline window, any variant),
            `log_n_train_length=512` (log-n scaling) and
            `hierarchical_position=True` or an alpha in `(0, 1)` (bert4keras's
            hierarchical positions: a learned table of `n` rows numbers
            `n * n` positions, the first `n` unchanged; see
            `keras_attn.layers.PositionEmbedding`).

    bert4keras's keywords are accepted too: `config_path=`, `checkpoint_path=`,
    `model=` (`"bert"`; `"roberta"`, which is BERT-format in bert4keras, lets
    the config decide; `"albert"`), `with_mlm=True` (`application="mlm"`,
    returning logits), `with_discriminator=True` (ELECTRA's
    `application="discriminator"`, logits: bert4keras applied a sigmoid).
    Giving one with its counterpart here is an error, and
    so are the bert4keras models and keywords this builder does not have
    (`t5_decoder`, `layer_norm_cond`, `sequence_length`, ...): each message
    says what to write instead.

    Returns:
        A `keras_attn.models.TransformerModel` (a functional `keras.Model`
        that checks its inputs) taking a dict with `"token_ids"`,
        `"segment_ids"` (when the config has token types, or for `"unilm"`)
        and, with `padding_mask_input`, `"padding_mask"`, with
        `conditional_layer_norm`, `"condition"`; or the list
        `[token_ids, segment_ids(, padding_mask)]` in that order. It returns
        one tensor when it has one output, else a dict with the keys
        `"sequence_output"`, `"pooled_output"`, `"nsp_logits"`,
        `"mlm_logits"`, `"discriminator_logits"` it has. The sequence outputs (`sequence_output`,
        `mlm_logits`) carry a Keras mask, false at padding, for the
        mask-consuming layers stacked on them.

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
