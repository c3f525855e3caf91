"""The Transformer template every model variant builds on."""

import copy
import math
from typing import NamedTuple

import keras
from keras import ops

from keras_attn import layer_names as names
from keras_attn import layers
from keras_attn.checkpoints import families
from keras_attn.layers import masking
from keras_attn.layers import positions
from keras_attn.torch_runtime.direct_call import layer_caller
from keras_attn.layers.feed_forward import resolve_activation
from keras_attn.layers.multi_head_attention import ROTARY_ENCODINGS
from keras_attn.models.input_contract import InputContract
from keras_attn.models.decoding_plan import DecodingPlan
from keras_attn.models.transformer_block import TransformerBlock
from keras_attn.models.transformer_block import apply_norm
from keras_attn.models.transformer_model import TransformerModel
from keras_attn.models.transformer_config import FIELD_DEFAULTS
from keras_attn.models.traits import TRAIT_HOOKS
from keras_attn.models.traits import TRAITS
from keras_attn.models.variants import VARIANTS
from keras_attn.models.variants import variant_name

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
    "attention_value",
    "apply_final_layers",
)

# How checkpoints store a variant's weights (its `checkpoint_family`), which
# decides the checkpoints and configs `build_transformer_model` lets it read:
# the built-in families' descriptions. Each family is declared in
# `keras_attn.checkpoints.families`, which `register_variant` checks against.
CHECKPOINT_FAMILIES = {name: families.get(name).description for name in families.names()}

# The `OutputMask` layer of each sequence output (`"output"` when the model
# has one).
MASK_LAYER_NAMES = names.OUTPUT_MASKS


class Transformer:
    """Builds a BERT-style Transformer as a functional `keras.Model`.

    A template method, as in bert4keras: `build()` creates every layer
    (`make_layers`), then the inputs, then calls `apply_embeddings`,
    `apply_main_layer` once per layer and `apply_final_layers`. The
    attention mask and any position bias are computed once and passed to
    every layer; each block is a `TransformerBlock`.

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

    @property
    def uses_segments(self):
        """Whether the model takes `segment_ids` (the unilm mask needs them)."""
        if not self.token_types:
            return False
        return self.config.segment_vocab_size > 1 or self.mask_mode == "unilm"

    def initializer(self):
        return keras.initializers.TruncatedNormal(stddev=self.config.initializer_range)

    def make_position_embedding(self):
        """The absolute positions of `position_embedding`
        (`Embedding-Position`), or None."""
        config = self.config
        if self.position_embedding is None:
            return None
        if self.position_embedding == "sinusoidal":
            return layers.SinusoidalPositionEmbedding(
                config.embedding_width, name=names.EMBEDDING_POSITION
            )
        after_padding = {}
        if self.position_embedding == "learned_after_padding":
            after_padding = dict(offset=config.pad_token_id + 1, count_from_padding=True)
        return layers.PositionEmbedding(
            config.max_position,
            config.embedding_width,
            **after_padding,
            hierarchical=config.hierarchical_position,
            embeddings_initializer=self.initializer(),
            name=names.EMBEDDING_POSITION,
        )

    def make_embedding_norm(self):
        """The norm of the summed embeddings (`Embedding-Norm`) with
        `embedding_norm`, else None."""
        return self.layer_norm(names.EMBEDDING_NORM) if self.embedding_norm else None

    def make_output_norm(self):
        """The norm after the last block (`Output-Norm`, GPT-2's `ln_f`)
        with `final_norm`, else None."""
        return self.layer_norm(names.OUTPUT_NORM) if self.final_norm else None

    def make_output_dropout(self):
        """The dropout after `make_output_norm`'s norm (`Output-Dropout`)."""
        return keras.layers.Dropout(self.config.dropout_rate, name=names.OUTPUT_DROPOUT)

    def make_attention_mask(self):
        """The layer computing the blocks' attention mask from the token
        ids (`Attention-Mask`: padding, UniLM's orders, T-TA's diagonal), or
        None for a mask of padding alone computed without a layer (T5)."""
        return layers.AttentionMask(
            self.mask_mode,
            pad_token_id=self.config.pad_token_id,
            mask_diagonal=self.mask_diagonal,
            name=names.ATTENTION_MASK,
        )

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

    @property
    def pad_token_id(self):
        """The token id the main stack reads as padding when no
        `padding_mask` says: the config's, or None for an encoder-decoder's
        decoder (T5's start token is the pad id)."""
        return None if self.application == "seq2seq" else self.config.pad_token_id

    def make_position_bias(self):
        """The `RelativePositionBias` of `relative_position_bias`
        (`Position-Bias`), whose bias by distance every block adds to its
        scores, or None."""
        kind = self.relative_position_bias
        heads = self.config.num_heads
        if kind is None:
            return None
        if kind == "alibi":
            return layers.ALiBiBias(heads, causal=self.causal, name=names.POSITION_BIAS)
        if kind in ("kerple_log", "kerple_power"):
            return layers.KerpleBias(heads, form=kind.split("_")[1], name=names.POSITION_BIAS)
        return layers.SandwichBias(dim=2 * (self.config.head_size // 2), name=names.POSITION_BIAS)

    def make_attention(self, index):
        return self.attention_layer(**self.attention_arguments(index))

    def attention_arguments(self, index):
        """The arguments of block `index`'s attention layer (see
        `make_attention`): the config's shapes, biases, window and positions;
        a variant adds the options of its family (LLaMA's rotary layout)."""
        config = self.config
        use_bias = self.use_bias if config.attention_bias is None else config.attention_bias
        arguments = dict(
            heads=config.num_heads,
            head_size=config.head_size,
            key_size=config.key_size,
            use_bias=use_bias,
            attention_dropout=config.attention_dropout_rate,
            attention_scale=self.attention_scale(index),
            attention_window=config.layer_window(index),
            blockwise_attention=config.blockwise_attention,
            position=self.make_position(index),
            log_n_train_length=config.log_n_train_length,
            kernel_initializer=self.initializer(),
            name=names.attention(self.block_index(index)),
        )
        if config.num_key_value_heads not in (None, config.num_heads):
            arguments["key_value_heads"] = config.num_key_value_heads
        if config.attention_sinks:
            arguments["attention_sinks"] = True
        if config.attention_sink_tokens and arguments["attention_window"] is not None:
            arguments["attention_sink_tokens"] = config.attention_sink_tokens
        return arguments

    def make_position(self, index):
        """Block `index`'s position object (`keras_attn.layers.positions`),
        or None: the variant's `position_encoding` and `rotary_layout`, with
        `rotary_arguments(index)` and the config's `rotary_value` and
        `max_relative_position`."""
        return positions.make_position(
            self.position_encoding,
            layout=self.rotary_layout,
            rotate_values=self.config.rotary_value,
            max_relative_position=self.config.max_relative_position,
            **self.rotary_arguments(index),
        )

    def rotary_arguments(self, index):
        """Block `index`'s RoPE `base` and `scaling`, the config's
        `layer_rotary_base(index)` and `rope_scaling`; none for a variant
        without rotary positions."""
        if self.position_encoding not in ROTARY_ENCODINGS:
            return {}
        return {
            "base": self.config.layer_rotary_base(index),
            "scaling": self.config.rope_scaling,
        }

    def _check_rotary_config(self, config):
        """Refuses a RoPE base or scaling for a variant without rotary positions."""
        if self.position_encoding in ROTARY_ENCODINGS:
            return
        given = {
            name: getattr(config, name)
            for name in ("rope_scaling", "rotary_base", "sliding_rotary_base")
            if getattr(config, name) != FIELD_DEFAULTS[name]
        }
        if given:
            name = variant_name(type(self))
            variant = f"variant={name!r}" if name else type(self).__name__
            raise ValueError(
                f"{variant} has no rotary positions (position_encoding="
                f"{self.position_encoding!r}), so it takes no "
                + " or ".join(f"{name}={value!r}" for name, value in given.items())
                + "; use a variant with rotary positions: "
                + ", ".join(sorted(
                    name for name, cls in VARIANTS.items()
                    if cls.position_encoding in ROTARY_ENCODINGS
                )) + "."
            )

    def attention_scale(self, index):
        """Block `index`'s `attention_scale`: True (`1 / sqrt(key_size)`),
        divided by `index + 1` with the config's
        `inverse_layer_attention_scale` (GPT-2's
        `scale_attn_by_inverse_layer_idx`)."""
        if not self.config.inverse_layer_attention_scale:
            return True
        return 1.0 / (math.sqrt(self.config.key_size) * (index + 1))

    def make_feed_forward(self, index):
        config = self.config
        return layers.FeedForward(
            config.intermediate_size,
            activation=self.hidden_act(),
            gated=self.feed_forward_gated(),
            use_bias=self.use_bias if config.mlp_bias is None else config.mlp_bias,
            kernel_initializer=self.initializer(),
            name=names.feed_forward(self.block_index(index)),
        )

    def make_block(self, index):
        """Block `index`, a `TransformerBlock` of the attention of
        `make_attention`, the feed-forward of `make_feed_forward`, and the
        norms, dropouts and residual adds named after them, in the order
        `norm_first` says, with `sublayer_post_norms` a norm of each
        sub-layer's output too."""
        config = self.config

        def post_norm(name):
            return self.layer_norm(name) if self.sublayer_post_norms else None

        attention = names.attention(self.block_index(index))
        feed_forward = names.feed_forward(self.block_index(index))
        return TransformerBlock(
            attention=self.make_attention(index),
            feed_forward=self.make_feed_forward(index),
            attention_norm=self.layer_norm(names.norm(attention)),
            feed_forward_norm=self.layer_norm(names.norm(feed_forward)),
            attention_dropout=keras.layers.Dropout(
                config.dropout_rate, name=names.dropout(attention)
            ),
            feed_forward_dropout=keras.layers.Dropout(
                config.dropout_rate, name=names.dropout(feed_forward)
            ),
            attention_add=keras.layers.Add(name=names.add(attention)),
            feed_forward_add=keras.layers.Add(name=names.add(feed_forward)),
            norm_first=self.norm_first,
            attention_post_norm=post_norm(names.post_norm(attention)),
            feed_forward_post_norm=post_norm(names.post_norm(feed_forward)),
        )

    def attention_value(self, hidden, index):
        """What block `index` attends to besides `hidden` (its keys and
        values), or None for self-attention; T-TA attends to the embeddings."""
        return None

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

    def make_input_contract(self):
        """What the built model accepts (see `InputContract`); call after
        `build_graph`."""
        config = self.config
        limits = {"token_ids": config.vocab_size}
        descriptions = {"token_ids": "vocab_size"}
        droppable = ()
        if self.uses_segments:
            # The unilm mask tells two segments apart even with one token type.
            segments = 2 if self.mask_mode == "unilm" else 1
            limits["segment_ids"] = max(config.segment_vocab_size, segments)
            descriptions["segment_ids"] = "type_vocab_size"
        else:
            droppable = ("segment_ids",)
        if self.padding_mask_input:
            limits["padding_mask"] = 2
        vectors = {}
        if self.conditional_layer_norm is not None:
            vectors["condition"] = self.conditional_layer_norm
        position = self.embedding_layers["position"]
        return InputContract(
            limits,
            max_length=getattr(position, "max_length", None),
            droppable=droppable,
            descriptions=descriptions,
            vectors=vectors,
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
        for index in range(len(self.blocks)):
            hidden = self.apply_main_layer(hidden, index, attention_mask, distance_bias, **source)
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

    def block_arguments(self, inputs, hidden):
        """`(attention_mask, distance_bias)`, what every block of the full
        pass takes (see `apply_main_layer`): the attention mask of `inputs`
        (a dict of `token_ids`, with `segment_ids` and `padding_mask` where
        taken, or `model.inputs`) and the position bias by distance of the
        embedded `hidden`, or None for a variant without one.

        ```python
        template, inputs = model.template, model.named_inputs
        hidden = template.apply_embeddings(inputs)
        mask, bias = template.block_arguments(inputs, hidden)
        for index in range(template.config.num_layers):
            hidden = template.apply_main_layer(hidden, index, mask, bias)
        ```
        """
        inputs = self.stream_inputs(inputs)
        if self.attention_mask_layer is None:
            attention_mask = ops.expand_dims(masking.real_tokens(
                inputs["token_ids"], self.pad_token_id, inputs.get("padding_mask")
            ), 1)
        else:
            attention_mask = self.attention_mask_layer(
                inputs["token_ids"],
                segment_ids=inputs.get("segment_ids"),
                padding_mask=inputs.get("padding_mask"),
            )
        # Once per distance, O(length): windowed layers then take only the
        # blocks of their band.
        distance_bias = None
        if self.position_bias is not None:
            distance_bias = self.position_bias(hidden, by_distance=True)
        return attention_mask, distance_bias

    def finish_blocks(self, hidden, condition=None, cache_step=None):
        """The hidden states after the last block: the output norm and its
        dropout where the variant has one (`make_output_norm`), in the full
        pass and in a decoding step (`cache_step` given)."""
        if self.output_norm is None:
            return hidden
        decoding = cache_step is not None
        hidden = apply_norm(self.output_norm, hidden, condition, layer_caller(decoding))
        return hidden if decoding else self.output_dropout(hidden)

    def mask_sequence_outputs(self, inputs, outputs):
        """`outputs` with a Keras mask on each `(batch, length, ...)` one: the
        padding (`padding_mask`, else `token_ids != pad_token_id`), for the
        mask-consuming layers users stack on the model."""
        padding_mask = masking.real_tokens(
            inputs["token_ids"], self.pad_token_id, inputs.get("padding_mask")
        )
        single = not isinstance(outputs, dict)
        named = {"output": outputs} if single else outputs
        masked = {
            name: self.prefixed(
                layers.OutputMask(name=MASK_LAYER_NAMES.get(name, f"{name}-Mask"))
            )(value, mask=padding_mask)
            if len(value.shape) == 3
            else value
            for name, value in named.items()
        }
        return masked["output"] if single else masked

    def get_inputs(self):
        if self.application == "seq2seq":
            stacks = ("encoder", "decoder")
            names = [f"{stack}_token_ids" for stack in stacks]
            if self.padding_mask_input:
                names += [f"{stack}_padding_mask" for stack in stacks]
            return {name: keras.Input((None,), dtype="int32", name=name) for name in names}
        inputs = {"token_ids": keras.Input((None,), dtype="int32", name="token_ids")}
        if self.uses_segments:
            inputs["segment_ids"] = keras.Input((None,), dtype="int32", name="segment_ids")
        if self.padding_mask_input:
            inputs["padding_mask"] = keras.Input(
                (None,), dtype="int32", name="padding_mask"
            )
        if self.conditional_layer_norm is not None:
            inputs["condition"] = keras.Input(
                (self.conditional_layer_norm,), dtype="float32", name="condition"
            )
        return inputs

    def inputs_by_name(self, inputs):
        """`inputs` as a dict: a dict (`model.named_inputs`) as it is, a list
        or tuple in the model's input order (`model.inputs`) by position;
        anything else is an error naming both forms."""
        if isinstance(inputs, dict):
            return inputs
        names = list(self.get_inputs())
        if isinstance(inputs, (list, tuple)) and len(inputs) == len(names):
            return dict(zip(names, inputs))
        found = (
            f"a {type(inputs).__name__} of {len(inputs)}"
            if isinstance(inputs, (list, tuple)) else type(inputs).__name__
        )
        raise TypeError(
            f"{type(self).__name__} takes its inputs as a dict with the keys {names} "
            f"(`model.named_inputs`) or a list in that order (`model.inputs`); "
            f"received {found}."
        )

    def apply_embeddings(self, inputs):
        inputs = self.stream_inputs(inputs)
        return self.embed(
            inputs["token_ids"],
            inputs.get("segment_ids"),
            inputs.get("padding_mask"),
            condition=self.condition,
        )

    def make_embedding_layers(self):
        """The embedding layers, created once so that a variant can embed
        several streams with shared tables (T-TA)."""
        config = self.config
        scale = {"lookup_scale": math.sqrt(config.hidden_size)} if self.embedding_scale else {}
        embedding_layers = {
            "token": layers.TokenEmbedding(
                config.vocab_size,
                config.embedding_width,
                embeddings_initializer=self.initializer(),
                **scale,
                name=names.EMBEDDING_TOKEN,
            ),
            "position": self.make_position_embedding(),
            "norm": self.make_embedding_norm(),
            "dropout": keras.layers.Dropout(config.dropout_rate, name=names.EMBEDDING_DROPOUT),
        }
        if config.hierarchical_position and not getattr(
            embedding_layers["position"], "hierarchical", False
        ):
            raise ValueError(
                f"hierarchical_position={config.hierarchical_position!r} needs a learned "
                f"absolute position table, which {type(self).__name__} does not have."
            )
        if config.segment_vocab_size > 0 and self.token_types:
            embedding_layers["segment"] = keras.layers.Embedding(
                config.segment_vocab_size,
                config.embedding_width,
                embeddings_initializer=self.initializer(),
                name=names.EMBEDDING_SEGMENT,
            )
        if config.embedding_width != config.hidden_size:
            embedding_layers["mapping"] = keras.layers.Dense(
                config.hidden_size,
                use_bias=self.use_bias,
                kernel_initializer=self.initializer(),
                name=names.EMBEDDING_MAPPING,
            )
        return embedding_layers

    def embedding_parts(self):
        """The roles of the embeddings `embed` adds: `token`, `segment`,
        `position`, those the model has."""
        return [
            role for role in ("token", "segment", "position")
            if self.embedding_layers.get(role) is not None
        ]

    def embedding_add(self, stream=""):
        """The `Add` of the embeddings of `stream` (`Embedding-Add{stream}`),
        created with the other layers for the main stream, on first use for a
        variant's second stream (T-TA's queries)."""
        if stream not in self.embedding_adds:
            self.embedding_adds[stream] = self.own(
                keras.layers.Add(name=names.embedding_add(stream))
            )
        return self.embedding_adds[stream]

    def embedding_mask(self, stream="", name=None):
        """The `OutputMask` (`Embedding-Mask{stream}`) that puts the padding
        on the summed embeddings as their Keras mask, which every later layer
        carries (put after the sum: Keras' `Add` drops a partial mask)."""
        name = name or names.embedding_mask(stream)
        masks = vars(self).setdefault("embedding_masks", {})
        if name not in masks:
            masks[name] = self.own(layers.OutputMask(name=name))
        return masks[name]

    def embed(self, token_ids, segment_ids=None, padding_mask=None, stream="",
              condition=None, cache_step=None):
        """`Mapping(Dropout(LN(token + segment + position)))`, the mapping only
        for factorised embeddings; a decoding step gives its `cache_step`,
        and `stream` suffixes a second stream's parameter-free layer names."""
        config = self.config
        embedding_layers = self.embedding_layers
        decoding = cache_step is not None
        run = layer_caller(decoding)
        if not decoding:
            padding_mask = masking.real_tokens(token_ids, self.pad_token_id, padding_mask)
        embedded = [run(embedding_layers["token"], token_ids)]
        if "segment" in embedding_layers:
            if segment_ids is None or config.segment_vocab_size == 1:
                # A single token type (RoBERTa) still has its embedding row.
                segment_ids = ops.zeros_like(token_ids)
            embedded.append(run(embedding_layers["segment"], segment_ids))
        position = embedding_layers["position"]
        if position is not None:
            if decoding:
                embedded.append(run(position, token_ids, positions=cache_step.embedding_positions))
            else:
                embedded.append(position(token_ids, padding_mask=padding_mask))
        hidden = embedded[0]
        if len(embedded) > 1:
            hidden = run(self.embedding_add(stream), embedded)
        if not decoding:
            hidden = self.embedding_mask(stream)(hidden, mask=padding_mask)
        if embedding_layers["norm"] is not None:
            hidden = apply_norm(embedding_layers["norm"], hidden, condition, run)
        if not decoding:
            hidden = embedding_layers["dropout"](hidden)
        if "mapping" in embedding_layers:
            hidden = run(embedding_layers["mapping"], hidden)
        return hidden

    def layer_norm(self, name):
        """A norm of the kind `norm` says: an RMS norm (with `norm_scale`
        and `norm_scale_offset`), a LayerNorm, or a
        `ConditionalLayerNormalization` when the model has a `condition`
        input (applied by `apply_norm`)."""
        if self.norm == "rms":
            return layers.RMSNormalization(
                epsilon=self.norm_epsilon(),
                scale=self.norm_scale,
                scale_offset=self.norm_scale_offset,
                name=name,
            )
        if self.conditional_layer_norm is None:
            return keras.layers.LayerNormalization(
                epsilon=self.norm_epsilon(), center=self.config.norm_bias, name=name
            )
        if not self.config.norm_bias:
            raise ValueError(
                "Conditional LayerNorms have a bias; a config with `norm_bias: false` "
                "is built without conditional_layer_norm."
            )
        return layers.ConditionalLayerNormalization(
            hidden_size=self.conditional_layer_norm_hidden_size,
            hidden_activation=self.conditional_layer_norm_activation,
            epsilon=self.norm_epsilon(),
            name=name,
        )

    def hidden_act(self):
        """The feed-forward's activation: the config's `hidden_act`, or
        `default_hidden_act` when the config does not set one."""
        if self.config.hidden_act is None:
            return self.default_hidden_act
        return self.config.hidden_act

    def feed_forward_gated(self):
        """Whether the feed-forward is gated: the config's
        `feed_forward_gated`, or `default_feed_forward_gated`."""
        if self.config.feed_forward_gated is None:
            return self.default_feed_forward_gated
        return self.config.feed_forward_gated

    def norm_epsilon(self):
        """The config's `layer_norm_epsilon`, or `family_layer_norm_epsilon`
        when the config is not in the variant's own family format."""
        own_format = self.config.checkpoint_family == self.checkpoint_family
        if self.family_layer_norm_epsilon is None or own_format:
            return self.config.layer_norm_epsilon
        return self.family_layer_norm_epsilon

    def block_index(self, index):
        """The index in block `index`'s layer names: None (no index) for
        every block when the variant shares one block (ALBERT)."""
        return None if self.shared_block else index

    def block_prefix(self, index):
        """The name prefix of block `index`'s layers: `Transformer-{index}`,
        or `Transformer` for every index when the variant shares one block."""
        return names.block(self.block_index(index))

    def apply_main_layer(self, hidden, index, attention_mask, distance_bias=None, source=None):
        """Block `index` on `hidden` (see `TransformerBlock`); an
        encoder-decoder's also attends to `source`, `(encoder_output,
        encoder_mask)`."""
        cross = {}
        if source is not None:
            cross = {"encoder_output": source[0], "encoder_mask": source[1]}
        return self.blocks[index](
            hidden,
            attention_mask=attention_mask,
            distance_bias=distance_bias,
            use_causal_mask=self.causal,
            value=self.attention_value(hidden, index),
            condition=self.condition,
            **cross,
        )

    def make_head_layers(self):
        """The layers after the blocks, by role: `pooler` and `nsp` (with
        `with_pool`/`with_nsp`), and the masked-LM head (`mlm_dense`,
        `mlm_norm`, `mlm_decoder` for an untied decoder, `mlm_bias`)."""
        config = self.config
        head = {}
        if self.with_pool:
            head["pooler"] = keras.layers.Dense(
                config.hidden_size,
                activation=self.pool_activation,
                kernel_initializer=self.initializer(),
                name=names.POOLER,
            )
            if self.with_nsp:
                head["nsp"] = keras.layers.Dense(
                    2, kernel_initializer=self.initializer(), name=names.NSP
                )
        if self.with_mlm and self.head == "embedding":
            head.update(self.make_embedding_head_layers())
        elif self.with_mlm:
            head["mlm_dense"] = keras.layers.Dense(
                config.embedding_width,
                activation=resolve_activation(self.hidden_act()),
                use_bias=self.mlm_dense_bias,
                kernel_initializer=self.initializer(),
                name=names.MLM_DENSE,
            )
            head["mlm_norm"] = self.layer_norm(names.MLM_NORM)
            if not config.tie_word_embeddings:
                # `tie_word_embeddings: false`: the checkpoint's own decoder.
                head["mlm_decoder"] = keras.layers.Dense(
                    config.vocab_size,
                    use_bias=False,
                    kernel_initializer=self.initializer(),
                    name=names.MLM_DECODER,
                )
            head["mlm_bias"] = layers.BiasAdd(name=names.MLM_BIAS)
        cap = self.config.final_logit_soft_cap
        if self.with_mlm and self.logit_soft_caps and cap is not None:
            head["soft_cap"] = layers.LogitSoftCap(cap, name=names.MLM_SOFT_CAP)
        return head

    def make_embedding_head_layers(self):
        """The `embedding` head's layers: the checkpoint's own projection
        (`MLM-Decoder`, no bias) with `tie_word_embeddings: false`, else,
        for factorised embeddings, `Output-Mapping` back to
        `embedding_size` before the tied token embedding."""
        config = self.config
        if not config.tie_word_embeddings:
            role, width, name = "lm_decoder", config.vocab_size, names.MLM_DECODER
        elif config.embedding_width != config.hidden_size:
            role, width, name = "output_mapping", config.embedding_width, names.OUTPUT_MAPPING
        else:
            return {}
        dense = keras.layers.Dense(
            width, use_bias=False, kernel_initializer=self.initializer(), name=name
        )
        return {role: dense}

    def language_model_head(self, hidden, condition=None, cache_step=None):
        """The language-model logits of `hidden`, by `head`: `transform`,
        `Bias(Decoder(LN(Dense(h))))`; `embedding`, `Decoder(h)` (or
        `(h W_out) E^T` for factorised embeddings); the decoder the token
        embedding transposed unless untied. With `logit_soft_caps` and the
        config's `final_logit_soft_cap` `c`, the logits are `c tanh(x / c)`.
        A decoding step gives its `cache_step`."""
        head = self.head_layers
        run = layer_caller(cache_step is not None)
        if self.head == "transform":
            hidden = apply_norm(head["mlm_norm"], run(head["mlm_dense"], hidden), condition, run)
        elif "output_mapping" in head:
            hidden = run(head["output_mapping"], hidden)
        decoder = head.get("mlm_decoder", head.get("lm_decoder"))
        if decoder is not None:
            logits = run(decoder, hidden)
        else:
            logits = run(self.embedding_layers["token"], hidden, reverse=True)
        if "mlm_bias" in head:
            logits = run(head["mlm_bias"], logits)
        if "soft_cap" in head:
            logits = run(head["soft_cap"], logits)
        return logits

    def apply_final_layers(self, hidden):
        head = self.head_layers
        outputs = {"sequence_output": hidden}
        if self.with_pool:
            pooled = head["pooler"](hidden[:, 0])
            outputs["pooled_output"] = pooled
            if self.with_nsp:
                outputs["nsp_logits"] = head["nsp"](pooled)
        if self.with_mlm:
            outputs["mlm_logits"] = self.language_model_head(hidden, self.condition)
            del outputs["sequence_output"]
        if len(outputs) == 1:
            return next(iter(outputs.values()))
        return outputs



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
