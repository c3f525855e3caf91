"""The Transformer template every model variant builds on."""

import copy
from typing import NamedTuple

import keras
from keras import ops

from keras_attn import layer_names as names
from keras_attn import layers
from keras_attn.checkpoints import families
from keras_attn.models.decoding_plan import DecodingPlan
from keras_attn.models import passes
from keras_attn.models.passes import FULL_PASS
from keras_attn.models.passes import step_of
from keras_attn.models.transformer_block import apply_norm
from keras_attn.models.transformer_model import TransformerModel
from keras_attn.models.traits import TRAIT_HOOKS
from keras_attn.models.traits import TRAITS
from keras_attn.models.template.attention import AttentionHooks
from keras_attn.models.template.blocks import BlockHooks
from keras_attn.models.template.embeddings import EmbeddingHooks
from keras_attn.models.template.heads import HeadHooks


class Application(NamedTuple):
    """What an `application=` builds.

    Attributes:
        mask_mode: the `AttentionMask` mode, `"bidirectional"` (padding
            only) or `"unilm"` (the seq2seq order of the segment ids).
        causal: whether every attention layer is causal (`use_causal_mask`).
        language_model_head: whether the output is the masked-LM head's
            logits (else the sequence output).
    """

    mask_mode: str
    causal: bool
    language_model_head: bool


APPLICATIONS = {
    "encoder": Application("bidirectional", causal=False, language_model_head=False),
    "mlm": Application("bidirectional", causal=False, language_model_head=True),
    "lm": Application("bidirectional", causal=True, language_model_head=True),
    "unilm": Application("unilm", causal=False, language_model_head=True),
    # ELECTRA's replaced-token detection: one logit per token, no masked-LM head.
    "discriminator": Application("bidirectional", causal=False, language_model_head=False),
    # An encoder-decoder's decoder (T5): causal, attending to the encoder.
    "seq2seq": Application("bidirectional", causal=True, language_model_head=True),
}

# Template hooks that only the full pass runs: a variant overriding one of
# them builds a model that cached decoding would not follow.
FULL_PASS_ONLY_HOOKS = (
    "build_graph",
    "get_inputs",
    "apply_embeddings",
    "apply_main_layer",
    "rotary_tables",
    "attention_value",
    "apply_final_layers",
)

# How checkpoints store a variant's weights (its `checkpoint_family`), which
# decides the checkpoints and configs `build_transformer_model` lets it read:
# the built-in families' descriptions. Each family is declared in
# `keras_attn.checkpoints.families`, which `register_variant` checks against.
CHECKPOINT_FAMILIES = {name: families.get(name).description for name in families.names()}


class Transformer(EmbeddingHooks, AttentionHooks, BlockHooks, HeadHooks):
    """Builds a BERT-style Transformer as a functional `keras.Model`.

    A template method, as in bert4keras: `build()` creates every layer
    (`make_layers`), then the inputs, then calls `apply_embeddings`,
    `apply_main_layer` once per layer and `apply_final_layers`. The
    attention mask, any position bias and any rotary tables
    (`rotary_tables`) are computed once and passed to every layer; each
    block is a `TransformerBlock`.

    A variant is a subclass registered with `keras_attn.register_variant`
    that states its traits as class attributes (`keras_attn.models.traits`
    says what each means; docs/variants.md lists every variant's). What no
    trait states, a hook computes (`make_position(index)`,
    `make_attention(index)`, `make_feed_forward(index)`, `make_block(index)`,
    `embed`, `language_model_head`, `make_attention_mask`, and for T5
    `make_encoder` and `encode`). Cached decoding runs these same hooks
    (through `decoding_plan()`); a variant that overrides `apply_embeddings`,
    `apply_main_layer`, `attention_value` or `apply_final_layers` instead
    cannot generate: `generate()` raises a `ValueError` naming the override.
    The hooks live by role under `keras_attn/models/template/`
    (`EmbeddingHooks`, `AttentionHooks`, `BlockHooks`, `HeadHooks`), which
    this class combines; the building and the decoding plan live here.

    ```python
    @keras_attn.register_variant("alibi_rotary")
    class AlibiRotary(keras_attn.Transformer):
        position_encoding = "rotary"
        position_embedding = None
        relative_position_bias = "alibi"

    model = keras_attn.build_transformer_model(
        "bert_config.json", "bert_model.ckpt", variant="alibi_rotary"
    )
    ```

    Layer names are stable: `Embedding-Token`, `Embedding-Segment`,
    `Embedding-Position`, `Embedding-Norm`, `Embedding-Mapping`,
    `Transformer-{i}-MultiHeadSelfAttention` and `Transformer-{i}-FeedForward`
    (each with `-Dropout`, `-Add`, `-Norm`; no `-{i}` under `shared_block`),
    `Pooler-Dense`, `NSP`, `MLM-Dense`, `MLM-Norm`, `MLM-Decoder` (untied
    only), `MLM-Bias`, and `Output-Mask` (or `Sequence-Output-Mask` and
    `MLM-Logits-Mask` for a dict of outputs).

    Args:
        config: a `keras_attn.TransformerConfig`.
        application: `"encoder"` (sequence output), `"mlm"` (tied-embedding
            masked-LM logits), `"lm"` (the same head under a causal mask),
            `"unilm"` (under the seq2seq mask of segment ids) or
            `"discriminator"` (ELECTRA's per-token logits); one of the
            variant's `applications`.
        with_pool: add BERT's pooler on the first token: `True` for `tanh`,
            or the name of another Keras activation.
        with_nsp: add the next-sentence head (implies `with_pool`).
        padding_mask_input: take an explicit `padding_mask` input instead of
            deriving padding from `config.pad_token_id`.
        conditional_layer_norm: `None`, or the width of a float input
            `"condition"` `(batch, width)` that modulates every LayerNorm
            (a `keras_attn.layers.ConditionalLayerNormalization` each).
        conditional_layer_norm_hidden_size: optional width of a dense layer
            applied to the condition first.
        conditional_layer_norm_activation: that dense layer's activation.
        prefix: a string put before every layer name except the inputs', so
            two models built from one checkpoint can share a graph
            (BERT-of-Theseus); checkpoints are read as if it were absent.

    Raises:
        ValueError: an `application` the variant does not support; a
            `conditional_layer_norm` that is not a positive integer; a
            `prefix` that is not a string.
    """

    # The traits: what a variant computes, stated as class attributes that
    # the hooks below read (`keras_attn.models.traits` says what each means,
    # docs/variants.md lists every variant's).
    attention_layer = layers.MultiHeadAttention
    position_encoding = None
    rotary_layout = "interleaved"
    position_embedding = "learned"
    relative_position_bias = None
    mask_diagonal = False
    causal = False
    norm = "layer"
    norm_scale = True
    norm_scale_offset = 0.0
    norm_first = False
    sublayer_post_norms = False
    final_norm = False
    embedding_norm = True
    embedding_scale = False
    token_types = True
    use_bias = True
    default_hidden_act = "gelu"
    default_feed_forward_gated = False
    shared_block = False
    head = "transform"
    mlm_dense_bias = True
    logit_soft_caps = False
    pooler = True
    applications = ("encoder", "mlm", "lm", "unilm")
    checkpoint_family = "bert"
    family_layer_norm_epsilon = None
    # Config families (`TransformerConfig.checkpoint_family`, from a Hugging
    # Face `model_type`) whose checkpoints are another architecture than
    # this variant's although their weights share its names, each with why:
    # the builder refuses them, naming the config's own variant.
    refused_config_families = {}

    # The step hooks this variant overrides without `step=`
    # (`passes.adapt_step_hooks`), by name: cached decoding refuses them.
    hooks_without_step = {}

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        cls.hooks_without_step = passes.adapt_step_hooks(cls)

    def __init__(
        self,
        config,
        application="encoder",
        with_pool=False,
        with_nsp=False,
        padding_mask_input=False,
        conditional_layer_norm=None,
        conditional_layer_norm_hidden_size=None,
        conditional_layer_norm_activation="linear",
        prefix="",
    ):
        if application not in self.applications:
            raise ValueError(
                f"{type(self).__name__} builds `application` in "
                f"{list(self.applications)}; received {application!r}."
            )
        if (with_pool or with_nsp) and not self.pooler:
            raise ValueError(
                f"{type(self).__name__} has no pooler or next-sentence head; build it "
                "without with_pool and with_nsp."
            )
        if conditional_layer_norm is not None and self.norm != "layer":
            raise ValueError(
                f"{type(self).__name__} has {self.norm!r} norms, which take no condition; "
                "build it without conditional_layer_norm (received "
                f"conditional_layer_norm={conditional_layer_norm!r})."
            )
        self._check_rotary_config(config)
        self.config = config
        self.application = application
        self.pool_activation = _pool_activation(with_pool or with_nsp)
        self.with_pool = self.pool_activation is not None
        self.with_nsp = with_nsp
        self.padding_mask_input = padding_mask_input
        if conditional_layer_norm is not None and (
            isinstance(conditional_layer_norm, bool)
            or not isinstance(conditional_layer_norm, int)
            or conditional_layer_norm < 1
        ):
            raise ValueError(
                "`conditional_layer_norm` is the width of the condition input, a "
                f"positive integer (or None); received {conditional_layer_norm!r}."
            )
        self.conditional_layer_norm = conditional_layer_norm
        if not isinstance(prefix, str) or "/" in prefix:
            raise ValueError(
                "`prefix` is a string put before every layer name, without '/'; "
                f"received {prefix!r}."
            )
        self.prefix = prefix
        # id -> layer: holding the layer keeps its id from being reused by a
        # later layer, which would then pass for one already renamed.
        self._prefixed = {}
        self.conditional_layer_norm_hidden_size = conditional_layer_norm_hidden_size
        self.conditional_layer_norm_activation = conditional_layer_norm_activation
        self.mask_mode, causal, self.with_mlm = APPLICATIONS[application]
        # A causal family (GPT) is causal in every application: its hidden
        # states are each position's given the tokens before it.
        self.causal = type(self).causal or causal
        if config.blockwise_attention and not self.causal:
            raise ValueError(
                "Config field `blockwise_attention=True` is blockwise causal attention "
                f"(XPOS) and needs application='lm'; received application={application!r}."
            )
        # The built model's layers by name, while `bind` adopts them.
        self._existing = None
        self.condition = None

    def full_pass_only_overrides(self):
        """The hooks of `FULL_PASS_ONLY_HOOKS` this variant overrides:
        cached decoding runs `embed`, the blocks and `language_model_head`,
        not these, so a variant overriding one cannot generate."""
        return [
            name
            for name in FULL_PASS_ONLY_HOOKS
            if getattr(type(self), name) is not getattr(Transformer, name)
        ]

    def decoding_plan(self):
        """What cached decoding (`generate`, `keras_attn.serving`) reads of
        this template, a `DecodingPlan`: its blocks and hooks, mask, ids,
        sizes and RoPE scaling, and why it cannot decode, if it cannot."""
        config = self.config
        refusal = None
        overridden = self.full_pass_only_overrides()
        if self.mask_diagonal:
            refusal = (
                "it masks each token from itself (T-TA); it predicts every token in one "
                "pass and cannot generate left to right."
            )
        elif overridden:
            refusal = (
                f"{type(self).__name__} overrides {', '.join(overridden)}, which only "
                "the full pass runs: cached decoding runs the template's `embed`, its "
                "`TransformerBlock`s and `language_model_head`, and would not compute what "
                "the model computes. Express the change through those (`make_block`, "
                "`make_attention`, `make_feed_forward`, `make_position_embedding`, "
                "`make_position_bias`, `embed`, `language_model_head`), or do not generate "
                "with this variant."
            )
        seq2seq = self.application == "seq2seq"
        return DecodingPlan(
            blocks=tuple(self.blocks),
            embed=self.embed,
            finish_blocks=self.finish_blocks,
            language_model_head=self.language_model_head,
            encode=self.encode if seq2seq else None,
            position_bias=self.position_bias,
            position_table=self.embedding_layers.get("position"),
            causal=self.causal,
            unilm=self.mask_mode == "unilm",
            seq2seq=seq2seq,
            conditional=self.conditional_layer_norm is not None,
            pad_token_id=config.pad_token_id,
            start_token_id=config.decoder_start_token_id,
            vocab_size=config.vocab_size,
            max_position=config.max_position,
            padding_mask_input=self.padding_mask_input,
            rope_scaling=config.rope_scaling,
            refusal=refusal,
        )

    @classmethod
    def traits(cls):
        """What this variant computes: `{trait: value}` for every trait of
        `TRAITS` the class has (its own or inherited), then
        `"overridden_hooks"`, the hooks of `TRAIT_HOOKS` it overrides (what
        it computes beyond its traits)."""
        resolved = {name: getattr(cls, name) for name in TRAITS if hasattr(cls, name)}
        resolved["overridden_hooks"] = [
            name for name in TRAIT_HOOKS if getattr(cls, name) is not getattr(Transformer, name)
        ]
        return resolved

    def arguments(self):
        """The constructor's arguments (but `config`), as `build` was given
        them: what a saved model records to rebuild this template."""
        return {
            "application": self.application,
            "with_pool": self.pool_activation or False,
            "with_nsp": self.with_nsp,
            "padding_mask_input": self.padding_mask_input,
            "conditional_layer_norm": self.conditional_layer_norm,
            "conditional_layer_norm_hidden_size": self.conditional_layer_norm_hidden_size,
            "conditional_layer_norm_activation": self.conditional_layer_norm_activation,
            **({"prefix": self.prefix} if self.prefix else {}),
        }

    # Hooks a variant may override -------------------------------------------

    def initializer(self):
        return keras.initializers.TruncatedNormal(stddev=self.config.initializer_range)

    def make_encoder(self):
        """An encoder-decoder's encoder (`application="seq2seq"`, T5's), as
        `(layers by role, blocks)`, which `encode` runs once on the source
        and the blocks attend to; None for a model of one stack."""
        return None

    def encode(self, token_ids, padding_mask=None):
        """An encoder-decoder's encoder on the source `token_ids` `(batch,
        source_length)`: its output `(batch, source_length, hidden_size)`
        and its real tokens (boolean `(batch, source_length)`), in the full
        pass and for generation (which encodes each source once). A variant
        with `make_encoder` defines it."""
        raise ValueError(f"{type(self).__name__} has no encoder (see `make_encoder`).")

    def stack_depth(self):
        """How many blocks the main stack has (an encoder-decoder's: its
        decoder's)."""
        return self.config.num_layers

    # The template ------------------------------------------------------------

    def build(self, name=None):
        """The model, a `TransformerModel` that checks its inputs."""
        inputs, outputs = self.build_graph()
        return TransformerModel(
            inputs,
            outputs,
            input_contract=self.make_input_contract(),
            application=self.application,
            name=name,
            template=self,
        )

    def make_layers(self):
        """Creates every layer the forward pass uses (or, bound to a built
        model, adopts the model's layers of the same names)."""
        self.attention_mask_layer = self.own(self.make_attention_mask())
        self.embedding_layers = {
            role: self.own(layer) for role, layer in self.make_embedding_layers().items()
        }
        self.embedding_adds = {}
        self.embedding_masks = {}
        if len(self.embedding_parts()) > 1:
            self.embedding_add()
        encoder = self.make_encoder()
        self.encoder_layers, self.encoder_blocks = None, []
        if encoder is not None:
            self.encoder_layers = {role: self.own(layer) for role, layer in encoder[0].items()}
            self.encoder_blocks = [self.own_block(block) for block in encoder[1]]
        self.position_bias = self.own(self.make_position_bias())
        if self.shared_block and len(set(self.config.layer_types or ())) > 1:
            raise ValueError(
                f"{type(self).__name__} shares one block between its layers, so they "
                f"attend alike; `layer_types={self.config.layer_types}` differs by layer."
            )
        shared = self.own_block(self.make_block(0)) if self.shared_block else None
        self.blocks = [
            shared or self.own_block(self.make_block(index))
            for index in range(self.stack_depth())
        ]
        self.output_norm = self.own(self.make_output_norm())
        self.output_dropout = None
        if self.output_norm is not None:
            self.output_dropout = self.own(self.make_output_dropout())
        self.head_layers = {
            role: self.own(layer) for role, layer in self.make_head_layers().items()
        }

    def bind(self, model):
        """This template over the layers of `model`, a model it built
        (possibly saved and loaded since): every layer it would create is
        the model's layer of the same name. Returns the template."""
        self._existing = {layer.name: layer for layer in model.layers}
        try:
            self.make_layers()
        finally:
            self._existing = None
        return self

    def prefixed(self, layer):
        """`layer` renamed with the template's `prefix`, once (before it is
        built, so its variables' paths carry the prefix too)."""
        if layer is not None and self.prefix and id(layer) not in self._prefixed:
            # `name` is a plain attribute of Keras 3 layers; an unbuilt layer
            # takes its variables' paths from it when it is built.
            layer.name = self.prefix + layer.name
            self._prefixed[id(layer)] = layer
        return layer

    def own(self, layer):
        """`layer` (renamed with the `prefix`), or, while binding to a built
        model, the model's layer of its name."""
        layer = self.prefixed(layer)
        if layer is None or self._existing is None:
            return layer
        if layer.name not in self._existing:
            raise ValueError(
                f"{type(self).__name__} creates a layer named {layer.name!r} that the "
                "model does not have: the model was not built by this variant with "
                "these arguments."
            )
        return self._existing[layer.name]

    def own_block(self, block):
        """`block` (its layers renamed with the `prefix`), or, while binding
        to a built model, a copy of it over the model's layers of the same
        names."""
        if self._existing is None:
            for value in vars(block).values():
                if isinstance(value, keras.layers.Layer):
                    self.prefixed(value)
            return block
        bound = copy.copy(block)
        for role, value in vars(block).items():
            if isinstance(value, keras.layers.Layer):
                setattr(bound, role, self.own(value))
        return bound

    def build_graph(self):
        """The model's `(inputs, outputs)`, for `keras.Model` or a subclass."""
        self.make_layers()
        inputs = self.get_inputs()
        self.condition = inputs.get("condition")
        # An encoder-decoder's blocks also attend to the encoded source.
        source = {}
        if self.encoder_layers is not None:
            encoded, valid = self.encode(
                inputs["encoder_token_ids"], inputs.get("encoder_padding_mask")
            )
            source = {"source": (encoded, ops.expand_dims(valid, 1))}
        stream = self.stream_inputs(inputs)
        hidden = self.apply_embeddings(stream)
        attention_mask, distance_bias = self.block_arguments(stream, hidden)
        rotary_tables = self.rotary_tables(stream)
        for index, tables in enumerate(rotary_tables):
            # Given only to blocks that have them, so that an override of
            # `apply_main_layer` written without them still builds.
            rotary = {} if tables is None else {"rotary_tables": tables}
            hidden = self.apply_main_layer(
                hidden, index, attention_mask, distance_bias, **source, **rotary
            )
        hidden = self.finish_blocks(hidden, self.condition)
        return inputs, self.mask_sequence_outputs(stream, self.apply_final_layers(hidden))

    def stream_inputs(self, inputs):
        """The inputs of the main stack: `inputs` as they are, or an
        encoder-decoder's decoder inputs (`decoder_token_ids`,
        `decoder_padding_mask`) as `token_ids` and `padding_mask`."""
        inputs = self.inputs_by_name(inputs)
        if "decoder_token_ids" not in inputs:
            return inputs
        stream = {"token_ids": inputs["decoder_token_ids"]}
        if "decoder_padding_mask" in inputs:
            stream["padding_mask"] = inputs["decoder_padding_mask"]
        return stream

    def finish_blocks(self, hidden, condition=None, step=FULL_PASS, cache_step=None):
        """The hidden states after the last block: the output norm and its
        dropout where the variant has one (`make_output_norm`), in the pass
        `step` (`FULL_PASS` or a `DecodeStep`; `cache_step` its deprecated
        spelling)."""
        if self.output_norm is None:
            return hidden
        step = step_of(step, cache_step)
        return step.dropout(self.output_dropout, apply_norm(self.output_norm, hidden, condition, step.run))

    def block_index(self, index):
        """The index in block `index`'s layer names: None (no index) for
        every block when the variant shares one block (ALBERT)."""
        return None if self.shared_block else index

    def block_prefix(self, index):
        """The name prefix of block `index`'s layers: `Transformer-{index}`,
        or `Transformer` for every index when the variant shares one block."""
        return names.block(self.block_index(index))



def _pool_activation(with_pool):
    """The pooler's activation for a `with_pool` argument, or None."""
    if with_pool is False or with_pool is None:
        return None
    if with_pool is True:
        return "tanh"
    if isinstance(with_pool, str):
        try:
            keras.activations.get(with_pool)
        except ValueError as error:
            raise ValueError(
                f"`with_pool={with_pool!r}` is neither a boolean nor a Keras activation."
            ) from error
        return with_pool
    raise ValueError(
        f"`with_pool` must be a boolean or an activation name; received {with_pool!r}."
    )
