"""The `Transformer` template's block hooks: the feed-forward layer, the norms,
each block's layers, and one block applied in the full pass."""

from keras import ops
import keras

from keras_attn import layer_names as names
from keras_attn import layers
from keras_attn.layers import masking
from keras_attn.models.transformer_block import TransformerBlock


class BlockHooks:
    """Hooks of `keras_attn.models.transformer.Transformer`, which combines
    this class with the other parts under `keras_attn/models/template/`; the
    methods read the variant's traits and config from `self`, and a variant
    overrides any of them as it overrides a hook of `Transformer`."""

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

    def apply_main_layer(
        self, hidden, index, attention_mask, distance_bias=None, source=None, rotary_tables=None
    ):
        """Block `index` on `hidden` (see `TransformerBlock`); an
        encoder-decoder's also attends to `source`, `(encoder_output,
        encoder_mask)`. `rotary_tables`: the block's entry of
        `rotary_tables(inputs)`, or None for its attention to compute its
        own (the same output)."""
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
            rotary_tables=rotary_tables,
            **cross,
        )
