"""Multi-head attention: the projections, the grouped heads, a position
object and the kernel call."""

import dataclasses

import keras
from keras import ops

from keras_attn.layers import banded
from keras_attn.layers import masking
from keras_attn.layers import packed
from keras_attn.layers import positions
from keras_attn.layers.attention_options import check_attention_options
from keras_attn.layers.attention_options import check_causal_call
from keras_attn.layers.attention_options import check_input_shapes
from keras_attn.layers.attention_options import check_positive_integer  # noqa: F401 (re-exported)
from keras_attn.layers.attention_options import score_scale
from keras_attn.layers.dot_product_attention import DotProductAttention
from keras_attn.layers.key_value_cache import KeyValueCache
from keras_attn.layers.key_value_cache import check_cache_step
from keras_attn.layers.positions import POSITION_ENCODINGS  # noqa: F401 (re-exported)
from keras_attn.layers.positions import ROTARY_ENCODINGS  # noqa: F401 (re-exported)
from keras_attn.layers.projections import make_dense
from keras_attn.layers.projections import merge_heads
from keras_attn.layers.projections import projection_config
from keras_attn.layers.projections import query_key_norms
from keras_attn.layers.projections import split_heads
from keras_attn.layers.projections import store_projection_arguments
from keras_attn.layers.relative_position_bias import add_distance_bias
from keras_attn.torch_runtime.direct_call import direct_call


@keras.saving.register_keras_serializable(package="keras_attn")
@positions.with_legacy_attributes
class MultiHeadAttention(keras.layers.Layer):
    """Multi-head scaled dot-product attention with a decoupled `key_size`.

    For each head `n`, with `query` rows `x_i` and `value`/`key` rows `y_j`:

        q_i = x_i W_q[n] + b_q[n]      (width key_size)
        k_j = y_j W_k[n] + b_k[n]      (width key_size)
        v_j = y_j W_v[n] + b_v[n]      (width head_size)
        a_ij = softmax_j(q_i . k_j / sqrt(key_size) + bias_nij), masked
        o_i[n] = sum_j a_ij v_j

    and `out_i = concat_n(o_i[n]) W_o + b_o`. `key_size` is independent of
    `head_size` (Bhojanapalli et al., 2020, "Low-Rank Bottleneck in
    Multi-head Attention Models", https://arxiv.org/abs/2002.07028). With
    `key_value_heads` `g < heads`, keys and values have `g` heads and query
    head `n` reads head `n // (heads / g)` (grouped-query attention,
    Ainslie et al., 2023, https://arxiv.org/abs/2305.13245).

    The full pass, a cached decoding step and `attend_projected` are one
    computation: project, encode positions, update the cache, call the
    kernel (`DotProductAttention`), project out.

    Args:
        heads: number of attention heads.
        head_size: per-head width of the value projection.
        key_size: per-head width of queries and keys; defaults to `head_size`.
        key_value_heads: a divisor of `heads`; defaults to `heads`.
        out_dim: width of the output; defaults to the last dimension of `query`.
        use_bias: whether the four projections have biases.
        output_use_bias: whether the output projection has one; None: `use_bias`.
        query_key_norm_epsilon: None, or the epsilon of RMS norms of the
            query and key heads before the positions (Qwen3).
        query_key_norm_scale_offset: added to those norms' scales (Gemma 3: 1.0).
        position: None, or a position object of `keras_attn.layers.positions`
            (`Rotary`, `XPos`, `ReRoPE`, `FunctionalRelative`).
        attention_dropout: dropout rate of the attention probabilities.
        attention_scale: True (`1 / sqrt(key_size)`), False (1), or the
            factor of the scores, a positive number.
        attention_logit_soft_cap: None, or `c > 0`: scores become
            `c tanh(score / c)` before the bias and the mask (Gemma 2).
        fused_attention: None: the fused kernel where it applies (for
            `key_size != head_size`, where `dot_product_attention.
            fuses_decoupled_widths`); True: there too; False: einsum only.
        attention_window: attend only within a window of this size
            (`i - window < j <= i` when causal, `|i - j| <= window // 2`).
        attention_sink_tokens: with a window, the number of first positions
            every query also sees (StreamingLLM's sink tokens).
        attention_sinks: learn one sink logit per head (`sink_logits`,
            checkpoint-free) joining each row's softmax as a dropped column.
        blockwise_attention: XPOS's blockwise causal attention in blocks of
            `attention_window` (each query sees its block and the previous).
        log_n_train_length: None, or `L`: scores of a query that sees `n`
            keys times `max(1, log(n) / log(L))` (Chiang & Cholak 2022).
        normalization: `"softmax"`, `"squared_relu"` or `"softmax_plus"`
            (see `keras_attn.layers.GatedAttentionUnit`).
        kernel_initializer, bias_initializer: of the projections.
        projection_policies: dtype policies of single projections by name,
            as `model.quantize("int8")` records them.
        **kwargs: base layer arguments (`name`, `dtype`); the former
            position arguments (`positions.LEGACY_ARGUMENTS`), deprecated.

    Call arguments:
        query: `(batch, query_length, d_in)`.
        value, key: `(batch, key_length, d)`; default `query`, `value`.
        attention_mask: boolean, broadcastable to `(batch, query_length,
            key_length)` (or rank 4); True where the query sees the key.
        attention_bias: finite additive bias broadcastable to the scores.
        distance_bias: a bias by distance `i - j`, `(batch, heads,
            query_length + key_length - 1)`.
        use_causal_mask: keep only keys `j <= i`.
        return_attention_scores: also return the probabilities, `(batch,
            heads, query_length, key_length)`.
        training: whether dropout is active.
        query_mask, value_mask, key_mask, mask: implicit Keras masks.
        cache, cache_step: a `KeyValueCache` and a `CacheStep`: a decoding
            step, which returns `(output, updated_cache)`.
        rotary_tables: None (computed here), or `rotary_tables(positions)`
            of the positions the queries and keys share, computed once for
            the layers of an equal position object and widths; same output.
        packing: with `cache`, a `keras_attn.layers.packed.PackedRows`
            where the step packs sequences in one row as the serving
            engine lays them out: attention on the blocks of slots each
            query sees (`packed.attend`), same output.

    Raises:
        ValueError: naming an argument out of range, inputs whose static
            shapes disagree, or `rotary_tables` this layer cannot read.

    Example:

    >>> layer = keras_attn.MultiHeadAttention(heads=4, head_size=16, key_size=64)
    >>> layer(np.random.rand(2, 10, 64).astype("float32")).shape
    (2, 10, 64)
    """

    # The `Dense` sublayers (LoRA adapts them, `keras_attn.lora`).
    dense_projections = ("query_dense", "key_dense", "value_dense", "output_dense")
    # The constructor arguments `get_config` returns as they were stored.
    config_arguments = (
        "heads", "head_size", "key_size", "key_value_heads", "out_dim", "output_use_bias",
        "query_key_norm_epsilon", "query_key_norm_scale_offset", "attention_dropout",
        "attention_scale", "fused_attention", "attention_window", "blockwise_attention",
        "log_n_train_length", "normalization", "attention_logit_soft_cap",
        "attention_sinks", "attention_sink_tokens",
    )

    def __init__(
        self, heads, head_size, key_size=None, out_dim=None, use_bias=True,
        key_value_heads=None, output_use_bias=None, query_key_norm_epsilon=None,
        query_key_norm_scale_offset=0.0, position=None, attention_dropout=0.0,
        attention_scale=True, fused_attention=None, attention_window=None,
        blockwise_attention=False, log_n_train_length=None,
        kernel_initializer="glorot_uniform", bias_initializer="zeros",
        projection_policies=None, normalization="softmax", attention_logit_soft_cap=None,
        attention_sinks=False, attention_sink_tokens=0, **kwargs,
    ):
        legacy = {name: kwargs.pop(name) for name in positions.LEGACY_ARGUMENTS if name in kwargs}
        super().__init__(**kwargs)
        self.position = positions.position_argument(position, legacy)
        check_attention_options(
            heads, head_size, key_size, key_value_heads, query_key_norm_epsilon,
            attention_dropout, attention_scale, attention_window, blockwise_attention,
            log_n_train_length, attention_logit_soft_cap, attention_sinks,
            attention_sink_tokens, normalization,
        )
        self._position = self.position or positions.Position()
        self._position.check_widths(key_size, head_size)
        self.heads, self.head_size, self.out_dim = heads, head_size, out_dim
        self.key_size = key_size or head_size
        self.key_value_heads = key_value_heads or heads
        self.output_use_bias = output_use_bias
        self.query_key_norm_epsilon = query_key_norm_epsilon
        self.query_key_norm_scale_offset = query_key_norm_scale_offset
        self.query_norm, self.key_norm = query_key_norms(
            query_key_norm_epsilon, query_key_norm_scale_offset, self.dtype_policy
        )
        store_projection_arguments(
            self, use_bias, kernel_initializer, bias_initializer, projection_policies
        )
        self.supports_masking = True
        self.attention_window, self.blockwise_attention = attention_window, blockwise_attention
        self.attention_sink_tokens = attention_sink_tokens
        self.attention_dropout, self.attention_scale = attention_dropout, attention_scale
        self.attention_logit_soft_cap = attention_logit_soft_cap
        self.fused_attention = fused_attention
        self.log_n_train_length = log_n_train_length
        self.normalization = normalization
        self._dropout = keras.layers.Dropout(
            attention_dropout, dtype=self.dtype_policy, name="attention_dropout"
        )
        self._kernel = DotProductAttention(
            scale=score_scale(attention_scale, self.key_size),
            dropout=self._dropout,
            fused=fused_attention,
            log_n_train_length=log_n_train_length,
            normalization=normalization,
            logit_soft_cap=attention_logit_soft_cap,
            **self._position.kernel_arguments(),
        )
        # The sink logits are created in `_build_projections`.
        self.attention_sinks = attention_sinks
        self.sink_logits = None
        if attention_sinks:
            self.checkpoint_free_weights = (
                tuple(getattr(type(self), "checkpoint_free_weights", ())) + ("sink_logits",)
            )

    @classmethod
    def from_config(cls, config):
        return super().from_config(positions.translate_legacy_config(config))

    def build(self, query_shape, value_shape=None, key_shape=None):
        self._build_projections(
            query_shape, value_shape, key_shape, self.heads, self.key_value_heads,
            self.key_value_heads,
        )

    def _build_projections(
        self, query_shape, value_shape, key_shape, query_heads, key_heads, value_heads
    ):
        """The query, key and value projections to `query_heads`,
        `key_heads` and `value_heads` heads, the output projection of
        `self.value_heads` heads, the query/key norms and the sink logits."""
        value_shape = query_shape if value_shape is None else value_shape
        key_shape = value_shape if key_shape is None else key_shape
        check_input_shapes(self, query_shape, value_shape, key_shape)
        attended_width = self.value_heads * self.head_size
        output_bias = self.use_bias if self.output_use_bias is None else self.output_use_bias
        for name, width, input_shape, use_bias in (
            ("query_dense", query_heads * self.key_size, query_shape, None),
            ("key_dense", key_heads * self.key_size, key_shape, None),
            ("value_dense", value_heads * self.head_size, value_shape, None),
            ("output_dense", self.out_dim or query_shape[-1],
             tuple(query_shape[:-1]) + (attended_width,), output_bias),
        ):
            dense = make_dense(self, width, name, use_bias=use_bias)
            dense.build(input_shape)
            setattr(self, name, dense)
        for norm in (self.query_norm, self.key_norm):
            if norm is not None:
                norm.build((None, None, None, self.key_size))
        self._build_attention_sinks()

    def _build_attention_sinks(self):
        """With `attention_sinks`, the `(heads,)` weight `sink_logits`
        handed to the kernel; every subclass's `build` calls it."""
        if not self.attention_sinks:
            return
        self.sink_logits = self.add_weight(
            name="sink_logits", shape=(self.heads,), initializer="zeros"
        )
        self._kernel = dataclasses.replace(self._kernel, sink_logits=self.sink_logits)

    @property
    def key_heads(self):
        """The number of query/key heads (`heads`)."""
        return self.heads

    @property
    def value_heads(self):
        """The number of value heads (`heads`)."""
        return self.heads

    def _built_input_widths(self):
        """The feature width of `query`, `value` and `key` the built layer takes."""
        return {name: getattr(self, f"{name}_dense").kernel.shape[0]
                for name in ("query", "value", "key")}

    def _project_heads(self, query, key, value):
        """`(query_heads, key_heads, value_heads, gate)`, `(batch, length,
        heads, size)` each, and what `_project_output` multiplies the result
        by (None here; a `GatedAttentionUnit`'s `u`)."""
        return (
            self._project_queries(query),
            self._project_keys(key),
            split_heads(direct_call(self.value_dense, value), self.head_size),
            None,
        )

    def _project_queries(self, query):
        """The projected query heads, normalised by `query_norm` if any."""
        heads = split_heads(direct_call(self.query_dense, query), self.key_size)
        return heads if self.query_norm is None else direct_call(self.query_norm, heads)

    def _project_keys(self, key):
        """The projected key heads, normalised by `key_norm` if any."""
        heads = split_heads(direct_call(self.key_dense, key), self.key_size)
        return heads if self.key_norm is None else direct_call(self.key_norm, heads)

    def _share_key_value_heads(self, keys, values):
        """Each key/value head repeated for the `heads / key_value_heads`
        query heads it serves (Hugging Face's `repeat_kv`), after the cache,
        which holds the key/value heads only."""
        groups = self.heads // self.key_value_heads
        if groups == 1:
            return keys, values
        return ops.repeat(keys, groups, axis=2), ops.repeat(values, groups, axis=2)

    def empty_cache(self, batch, capacity):
        """A `KeyValueCache` of zeros, `capacity` positions of `batch` rows
        of the layer's key and value heads, in its compute dtype."""
        return KeyValueCache.empty(
            batch, capacity, self.key_value_heads, self.key_size,
            self.key_value_heads, self.head_size, self.compute_dtype,
        )

    def _project_output(self, attended, gate):
        """The output projection of the attention result `(batch, length,
        heads, head_size)`."""
        return direct_call(self.output_dense, merge_heads(attended, self.value_heads * self.head_size))

    def call(
        self, query, value=None, key=None, attention_mask=None, attention_bias=None,
        distance_bias=None, use_causal_mask=False, return_attention_scores=False,
        training=None, query_mask=None, value_mask=None, key_mask=None, mask=None,
        cache=None, cache_step=None, rotary_tables=None, packing=None,
    ):
        if cache is not None:
            check_cache_step(self, cache_step)
            # The caller's mask over the slots holds causality, the window
            # and padding, from the slots' positions.
            self._check_call_arguments(query, query, query, None, True, rotary_tables)
            output, _, cache = self._attend(
                self._project_heads(query, query, query), cache_step.positions,
                cache_step.key_positions, masking.merge_attention_masks(attention_mask),
                attention_bias, distance_bias, training,
                cache=cache, step=cache_step, rotary_tables=rotary_tables, packing=packing,
            )
            return output, cache
        if value is None:
            value = query
            if value_mask is None:
                value_mask = mask if query_mask is None else query_mask
        if query_mask is None:
            query_mask = mask
        if key is None:
            key = value
            if key_mask is None:
                key_mask = value_mask
        self._check_call_arguments(query, value, key, attention_mask, use_causal_mask,
                                   rotary_tables)
        mask, band = banded.full_pass_attention(
            self, use_causal_mask, query, key, attention_mask, query_mask, key_mask,
            attention_bias, distance_bias, return_attention_scores, training,
        )
        output, scores, _ = self._attend(
            self._project_heads(query, key, value),
            ops.arange(ops.shape(query)[1], dtype="int32"),
            ops.arange(ops.shape(key)[1], dtype="int32"),
            mask, attention_bias, distance_bias, training, return_attention_scores, band=band,
            rotary_tables=rotary_tables,
        )
        if return_attention_scores:
            return output, scores
        return output

    def _attend(
        self, heads, query_positions, key_positions, mask, attention_bias=None,
        distance_bias=None, training=None, return_scores=False, cache=None, step=None,
        band=None, rotary_tables=None, packing=None,
    ):
        """The full pass, a cached step and `attend_projected` from the
        projected `heads`: encode positions (by `rotary_tables` where
        given), write the cache, decay, share the key/value heads, attend
        under `mask` (or on `band`'s blocks, or on a packed step's blocks
        where `packing` is given, the heads shared on the blocks), project
        out. Positions None encode nothing. Returns `(output, scores,
        cache)`."""
        query_heads, key_heads, value_heads, gate = heads
        if query_positions is not None:
            new_positions = key_positions if step is None else step.rotation_positions
            query_heads, key_heads, value_heads = self._position.rotate(
                query_heads, key_heads, value_heads,
                query_positions if step is None else new_positions, new_positions,
                tables=rotary_tables,
            )
        if cache is not None:
            cache = cache.write(key_heads, value_heads, step)
            key_heads, value_heads = cache
        if query_positions is not None:
            query_heads, key_heads = self._position.decay(
                query_heads, key_heads, query_positions, key_positions, cached=step is not None
            )
        if (packing is not None and attention_bias is None and distance_bias is None
                and not self._position.reads_distances):
            # (A bias or distances read every slot: those take the dense path.)
            attended = packed.attend(
                self._kernel, packing, query_heads, key_heads, value_heads, mask, training,
                share=self._share_key_value_heads,
            )
            return self._project_output(attended, gate), None, cache
        key_heads, value_heads = self._share_key_value_heads(key_heads, value_heads)
        if band is not None:
            return self._project_output(band(query_heads, key_heads, value_heads), gate), None, cache
        distance = None
        if distance_bias is not None or self._position.reads_distances:
            distance = masking.relative_positions(
                ops.shape(query_heads)[1], ops.shape(key_heads)[1], query_positions, key_positions
            )
        if distance_bias is not None:
            # Entry 0 of the table is the distance `-(n - 1)`
            # (`RelativePositionBias.distance_table`): n is the number of
            # keys in a full pass, of new tokens in a cached step (see the
            # `cache` argument), whatever positions the cache holds.
            spanned = ops.shape(key_heads if step is None else query_heads)[1]
            attention_bias = add_distance_bias(attention_bias, distance_bias, distance, spanned)
        attended, scores = self._kernel(
            query_heads, key_heads, value_heads, mask, attention_bias, training,
            return_scores, distance=distance,
        )
        return self._project_output(attended, gate), scores, cache

    def rotary_tables(self, positions, lengths=None):
        """The `rotary_tables` call argument of the integer `positions`
        (`(length,)` or `(batch, length)`), or None (`Position.tables`;
        `lengths`, int `(batch,)`, each row's length encoded)."""
        return self._position.tables(positions, self.key_size, self.head_size, lengths)

    def project_key_value(self, value, key=None):
        """The keys and values of `value` (and `key`, default `value`) as a
        `KeyValueCache` for `attend_projected` (a cross-attention's, once per
        source); no positions are encoded."""
        key = value if key is None else key
        return KeyValueCache(
            self._project_keys(key),
            split_heads(direct_call(self.value_dense, value), self.head_size),
        )

    def attend_projected(self, query, key_value, attention_mask=None, training=None):
        """`self(query, value=value, attention_mask=attention_mask)` with
        `key_value = project_key_value(value)` computed once."""
        heads = (self._project_queries(query), key_value.keys, key_value.values, None)
        mask = masking.merge_attention_masks(attention_mask)
        return self._attend(heads, None, None, mask, training=training)[0]

    def _check_call_arguments(self, query, value, key, attention_mask, use_causal_mask,
                              rotary_tables=None):
        """The checks of every call, eager or symbolic."""
        mask_shape = None if attention_mask is None else attention_mask.shape
        check_input_shapes(self, query.shape, value.shape, key.shape, mask_shape)
        check_causal_call(self, use_causal_mask)
        if rotary_tables is not None:
            positions.check_tables(self, query.shape[1], key.shape[1])

    def compute_output_shape(self, query_shape, value_shape=None, key_shape=None):
        return tuple(query_shape[:-1]) + (self.out_dim or query_shape[-1],)

    def compute_output_spec(self, query, value=None, key=None, attention_mask=None,
                            use_causal_mask=False, return_attention_scores=False, **kwargs):
        # Symbolic calls (functional models, the builder) get the eager checks.
        value = query if value is None else value
        key = value if key is None else key
        self._check_call_arguments(query, value, key, attention_mask, use_causal_mask,
                                   kwargs.get("rotary_tables"))
        output = keras.KerasTensor(self.compute_output_shape(query.shape), dtype=self.compute_dtype)
        if not return_attention_scores:
            return output
        scores_shape = (query.shape[0], self.value_heads, query.shape[1], key.shape[1])
        return output, keras.KerasTensor(scores_shape, dtype=self.compute_dtype)

    def get_config(self):
        config = super().get_config()
        config.update({name: getattr(self, name) for name in self.config_arguments})
        config["position"] = keras.saving.serialize_keras_object(self.position)
        config.update(projection_config(self))
        return config
