"""One Transformer block, the same code for the full pass and a decoding step."""

import dataclasses
from typing import Optional

import keras

from keras_attn.layers.conditional_layer_normalization import ConditionalLayerNormalization
from keras_attn.layers.key_value_cache import KeyValueCache
from keras_attn.models.passes import FULL_PASS
from keras_attn.models.passes import every_query
from keras_attn.models.passes import step_of
from keras_attn.torch_runtime.direct_call import keras_call


# eq=False: a block is its layers, compared and hashed by identity as they are.
@dataclasses.dataclass(eq=False)
class TransformerBlock:
    """A self-attention sub-layer, optionally a cross-attention sub-layer
    (an encoder-decoder's decoder), and a feed-forward sub-layer, each with
    dropout, a residual connection and a norm, in one order for every pass.

    Post-LN (BERT) and pre-LN (`norm_first=True`, GPT-2; Xiong et al. 2020,
    https://arxiv.org/abs/2002.04745):

        x = Norm(x + Drop(Attention(x)))        x = x + Drop(Attention(Norm(x)))
        x = Norm(x + Drop(FFN(x)))              x = x + Drop(FFN(Norm(x)))

    A cross-attention sub-layer, `CrossAttention(x, encoder_output)`, takes
    the same form between the two. A block may have no feed-forward
    (GAU-alpha: `x = Norm(x + Drop(GAU(x)))`) and a norm may be None.
    `feed_forward_output_norm` gives GPT2-ML's
    `x = Norm_1(x + Drop(FFN(Norm_0(x))))`; `attention_post_norm` and
    `feed_forward_post_norm` Gemma 2's `x = x + Norm_post(Attention(Norm(x)))`
    (https://arxiv.org/abs/2408.00118).

    The template calls the block on symbolic tensors to build the graph, so
    each sub-layer stays a named layer of the model; a decoding step calls
    it on concrete tensors with a `KeyValueCache`, the same layers in the
    same order, asking its `step` what differs (see
    `keras_attn.models.passes`). A `ConditionalLayerNormalization` norm is
    given `condition`; dropout runs in the full pass only.
    Args:
        attention: a `keras_attn.MultiHeadAttention` (or subclass).
        feed_forward: a `keras_attn.layers.FeedForward`, or None for a block
            without one (then `feed_forward_norm`, `feed_forward_dropout`
            and `feed_forward_add` are None too).
        attention_norm, feed_forward_norm: the two norms.
        attention_dropout, feed_forward_dropout: the two dropout layers.
        attention_add, feed_forward_add: the two residual `Add` layers.
        norm_first: pre-LN order instead of post-LN.
        feed_forward_output_norm: a norm applied after the feed-forward's
            residual add (GPT2-ML; with `norm_first`).
        attention_post_norm, feed_forward_post_norm: norms of the
            self-attention's and the feed-forward's outputs before their
            dropout and residual add (Gemma 2; with `norm_first`).
        cross_attention: the cross-attention sub-layer, or None: a
            `keras_attn.MultiHeadAttention` whose queries are the block's
            hidden states and whose keys and values are `encoder_output`.
        cross_attention_norm, cross_attention_dropout, cross_attention_add:
            its norm, dropout and residual `Add` (all three with
            `cross_attention`, or none).

    Call arguments:
        hidden: `(batch, length, hidden_size)`.
        attention_mask, distance_bias, use_causal_mask: the attention's
            (see `MultiHeadAttention`; in a decoding step the mask and the
            distance table of the cache's slots).
        value: keys and values other than `hidden` (T-TA's embeddings).
        condition: `(batch, width)`, for conditional norms.
        cache: a `KeyValueCache`, in a decoding step only.
        step: the pass (`keras_attn.models.passes`): `FULL_PASS`, or a
            `DecodeStep` with `cache`; the call then returns `(hidden,
            updated_cache)`. `cache_step=` (a `CacheStep`) is its deprecated
            spelling.
        attention_bias: an additive bias of a decoding step's slots.
        encoder_output: `(batch, source_length, width)`, what the
            cross-attention attends to (required when the block has one);
            or the `KeyValueCache` of its keys and values
            (`cross_attention.project_key_value(encoder_output)`, which
            decoding steps compute once per source).
        encoder_mask: boolean, broadcastable to `(batch, length,
            source_length)`: the encoder positions each query may see.
        rotary_tables: None, or the self-attention's `rotary_tables` of the
            pass's positions, computed once for the blocks that share them
            (see `MultiHeadAttention`).

    Example, the blocks of a built model (its template holds them):

    >>> model = keras_attn.build_transformer_model(config, application="lm")
    >>> block = model.template.blocks[0]
    >>> block.attention.name, block.norm_first
    ('Transformer-0-MultiHeadSelfAttention', False)
    >>> model.get_layer("Transformer-0-FeedForward-Norm") is block.feed_forward_norm
    True
    """

    attention: keras.layers.Layer
    feed_forward: Optional[keras.layers.Layer]
    attention_norm: Optional[keras.layers.Layer]
    feed_forward_norm: Optional[keras.layers.Layer]
    attention_dropout: keras.layers.Layer
    feed_forward_dropout: Optional[keras.layers.Layer]
    attention_add: keras.layers.Layer
    feed_forward_add: Optional[keras.layers.Layer]
    norm_first: bool = False
    cross_attention: Optional[keras.layers.Layer] = None
    cross_attention_norm: Optional[keras.layers.Layer] = None
    cross_attention_dropout: Optional[keras.layers.Layer] = None
    cross_attention_add: Optional[keras.layers.Layer] = None
    feed_forward_output_norm: Optional[keras.layers.Layer] = None
    attention_post_norm: Optional[keras.layers.Layer] = None
    feed_forward_post_norm: Optional[keras.layers.Layer] = None

    def __post_init__(self):
        cross = (self.cross_attention, self.cross_attention_norm, self.cross_attention_dropout,
                 self.cross_attention_add)
        if any(layer is None for layer in cross) and any(layer is not None for layer in cross):
            raise ValueError(
                "TransformerBlock: a cross-attention sub-layer needs all of "
                "cross_attention, cross_attention_norm, cross_attention_dropout and "
                "cross_attention_add."
            )
        feed_forward_layers = (self.feed_forward_norm, self.feed_forward_dropout,
                               self.feed_forward_add)
        if self.feed_forward is None and any(layer is not None for layer in feed_forward_layers):
            raise ValueError(
                "TransformerBlock: a block without a feed-forward sub-layer "
                "(feed_forward=None) takes no feed_forward_norm, feed_forward_dropout "
                "or feed_forward_add."
            )

    @property
    def layers(self):
        """The block's layers, in the order they are applied."""
        sublayers = [
            (self.attention_norm, self.attention, self.attention_post_norm,
             self.attention_dropout, self.attention_add),
            (self.cross_attention_norm, self.cross_attention, self.cross_attention_dropout,
             self.cross_attention_add),
            (self.feed_forward_norm, self.feed_forward, self.feed_forward_post_norm,
             self.feed_forward_dropout, self.feed_forward_add, self.feed_forward_output_norm),
        ]
        return [layer for group in sublayers for layer in group if layer is not None]

    def __call__(
        self,
        hidden,
        attention_mask=None,
        distance_bias=None,
        use_causal_mask=False,
        value=None,
        condition=None,
        cache=None,
        step=FULL_PASS,
        attention_bias=None,
        encoder_output=None,
        encoder_mask=None,
        rotary_tables=None,
        cache_step=None,
    ):
        step = step_of(step, cache_step)

        def norm(layer, x):
            return x if layer is None else apply_norm(layer, x, condition, step.run)

        def residual(norm_layer, dropout, add, x, transform, post_norm=None):
            """`Norm(x + Drop(f(x)))`, or `x + Drop(Post(f(Norm(x))))` pre-LN."""
            normed = norm(norm_layer, x) if self.norm_first else x
            transformed = step.dropout(dropout, norm(post_norm, transform(normed)))
            x = step.run(add, [x, transformed])
            return x if self.norm_first else norm(norm_layer, x)

        def self_attention(x):
            nonlocal cache
            arguments = {"attention_mask": attention_mask, "distance_bias": distance_bias}
            if attention_bias is not None:
                arguments["attention_bias"] = attention_bias
            if rotary_tables is not None:
                # Given only where computed: an attention layer of a
                # variant's own need not take them.
                arguments["rotary_tables"] = rotary_tables
            if value is not None:
                arguments["value"] = value
            if use_causal_mask:
                arguments["use_causal_mask"] = True
            attended, cache = step.attend(self.attention, x, cache, **arguments)
            return attended

        def cross_attention(x):
            if isinstance(encoder_output, KeyValueCache):
                return self.cross_attention.attend_projected(
                    x, encoder_output, attention_mask=encoder_mask
                )
            return step.run(
                self.cross_attention, x, value=encoder_output, attention_mask=encoder_mask,
                query_mask=every_query(x),
            )

        hidden = residual(
            self.attention_norm, self.attention_dropout, self.attention_add, hidden,
            self_attention, self.attention_post_norm,
        )
        if self.cross_attention is not None:
            if encoder_output is None:
                raise ValueError(
                    f"{self.cross_attention.name}: this block attends to an encoder's "
                    "output; give `encoder_output`."
                )
            hidden = residual(
                self.cross_attention_norm, self.cross_attention_dropout,
                self.cross_attention_add, hidden,
                cross_attention,
            )
        if self.feed_forward is not None:
            hidden = residual(
                self.feed_forward_norm, self.feed_forward_dropout, self.feed_forward_add,
                hidden, lambda x: step.run(self.feed_forward, x), self.feed_forward_post_norm,
            )
        hidden = norm(self.feed_forward_output_norm, hidden)
        return step.block_output(hidden, cache)


def apply_norm(layer, hidden, condition=None, run=keras_call):
    """`layer(hidden)` by `run`, given the `condition` when the layer is a
    `ConditionalLayerNormalization`."""
    if isinstance(layer, ConditionalLayerNormalization):
        return run(layer, hidden, condition=condition)
    return run(layer, hidden)
