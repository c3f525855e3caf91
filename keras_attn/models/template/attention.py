"""The `Transformer` template's attention hooks: the attention mask, the
position bias and the rotary tables (each computed once per pass and given
to every block), and each block's position object and attention layer."""

import math

from keras_attn import layer_names as names
from keras_attn import layers
from keras_attn.layers import positions
from keras_attn.layers.multi_head_attention import ROTARY_ENCODINGS
from keras_attn.models.transformer_config import FIELD_DEFAULTS
from keras_attn.models.variants import VARIANTS
from keras_attn.models.variants import variant_name


class AttentionHooks:
    """Hooks of `keras_attn.models.transformer.Transformer`, which combines
    this class with the other parts under `keras_attn/models/template/`; the
    methods read the variant's traits and config from `self`, and a variant
    overrides any of them as it overrides a hook of `Transformer`."""

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

    def rotary_tables(self, inputs):
        """Each block's `rotary_tables` for the full pass over `inputs` (the
        main stack's, see `stream_inputs`), a list with None for a block
        whose self-attention has none: one `positions.RotaryTables` node of
        the graph per distinct position object and widths (Gemma 3's local
        and global RoPE bases are two), read by every block that has them."""
        token_ids = self.stream_inputs(inputs)["token_ids"]
        return positions.shared_tables(
            [block.attention for block in self.blocks],
            lambda attention: positions.RotaryTables(
                attention.position, attention.key_size, attention.head_size
            )(token_ids),
        )

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

    def attention_value(self, hidden, index):
        """What block `index` attends to besides `hidden` (its keys and
        values), or None for self-attention; T-TA attends to the embeddings."""
        return None
