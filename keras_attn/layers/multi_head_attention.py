"""Multi-head attention with a per-head query/key width decoupled from the
value width."""

import math

import keras
from keras import ops

from keras_attn.layers import banded
from keras_attn.layers import masking
from keras_attn.layers.projections import make_dense
from keras_attn.layers.projections import projection_config
from keras_attn.layers.rotary_embedding import RotaryEmbedding

POSITION_ENCODINGS = (None, "rotary", "xpos")


def check_positive_integer(argument, value, optional=False):
    """Raises a ValueError naming `argument` unless `value` is a positive
    integer (or None, when `optional`)."""
    if optional and value is None:
        return
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        allowed = "a positive integer or None" if optional else "a positive integer"
        raise ValueError(f"`{argument}` must be {allowed}; received {value!r}.")


def jax_runs_on_cpu():
    """Whether the backend is JAX and its default device is a CPU."""
    if keras.config.backend() != "jax":
        return False
    import jax

    return jax.default_backend() == "cpu"


@keras.saving.register_keras_serializable(package="keras_attn")
class MultiHeadAttention(keras.layers.Layer):
    """Multi-head scaled dot-product attention with a decoupled `key_size`.

    For each head `n`, with `query` rows `x_i` and `value`/`key` rows `y_j`:

        q_i = x_i W_q[n] + b_q[n]      (width key_size)
        k_j = y_j W_k[n] + b_k[n]      (width key_size)
        v_j = y_j W_v[n] + b_v[n]      (width head_size)
        a_ij = softmax_j(q_i . k_j / sqrt(key_size) + bias_nij), masked
        o_i[n] = sum_j a_ij v_j

    and the heads are concatenated and projected: `out_i = concat_n(o_i[n]) W_o + b_o`.

    `key_size` is independent of `head_size`: Bhojanapalli et al. (2020),
    "Low-Rank Bottleneck in Multi-head Attention Models"
    (https://arxiv.org/abs/2002.07028), show that with
    `head_size = hidden / heads` each head's score matrix has rank at most
    `head_size`, and that raising the query/key width removes that bottleneck
    without changing the hidden size. The RoBERTa+ checkpoints rely on it.

    Parameters, exactly: query and key kernels `d_in x heads*key_size`, value
    kernel `d_in x heads*head_size`, output kernel `heads*head_size x out_dim`,
    each with a bias when `use_bias`.

    Where possible the layer calls `keras.ops.dot_product_attention`, so JAX
    and torch use their fused kernels: when `fused_attention` is on, attention
    dropout is inactive, no scores are requested, the widths agree or the
    backend accepts differing widths (JAX's fused kernel does not), and the
    computation is not float16 on JAX's CPU backend (XLA's CPU backend lacks
    the mixed-precision product that kernel asks for under jit). Otherwise
    it takes an einsum path with the softmax in float32. Both paths give the
    same numbers, including for fully masked rows.

    Args:
        heads: number of attention heads.
        head_size: per-head width of the value projection.
        key_size: per-head width of the query and key projections; defaults
            to `head_size`. Scores are scaled by `1 / sqrt(key_size)`.
        out_dim: width of the output; defaults to the last dimension of
            `query`.
        use_bias: whether the four projections have biases.
        attention_dropout: dropout rate applied to the attention
            probabilities during training.
        attention_scale: whether to scale scores by `1 / sqrt(key_size)`.
        fused_attention: allow the `keras.ops.dot_product_attention` path.
            Turn it off to force the einsum path (numerically the same).
        attention_window: attend only within a local window of this size
            (the `LocalMaskBaseline` band: `i - window < j <= i` under a
            causal mask, `|i - j| <= window // 2` otherwise).
        blockwise_attention: use XPOS's blockwise causal attention instead of
            a sliding window: blocks of `attention_window` positions, each
            query seeing its own block and the previous one. Requires
            `attention_window` (a ValueError otherwise) and a call with
            `use_causal_mask=True` (a ValueError at call time otherwise).
        position_encoding: `None`, `"rotary"` (RoPE on queries and keys) or
            `"xpos"` (RoPE with XPOS's decay; causal only: a call without
            `use_causal_mask=True` raises a ValueError); see
            `keras_attn.layers.RotaryEmbedding`.
        rotary_max_wavelength: RoPE's base.
        xpos_scale_base: XPOS's scale base.
        log_n_train_length: log-n attention scaling (Chiang & Cholak 2022,
            "Overcoming a Theoretical Limitation of Self-Attention",
            https://arxiv.org/abs/2202.12172; Su 2021): scores of a query that
            sees `n` keys are multiplied by `max(1, log(n) / log(train_length))`,
            which keeps attention entropy from growing on sequences longer
            than the training length. `None` turns it off.
        kernel_initializer: initializer of the four kernels.
        bias_initializer: initializer of the four biases.
        **kwargs: base layer arguments such as `name` and `dtype`.

    Call arguments:
        query: `(batch, query_length, d_in)`.
        value: `(batch, key_length, d_value)`; defaults to `query`
            (self-attention).
        key: `(batch, key_length, d_key)`; defaults to `value`.
        attention_mask: boolean, broadcastable to
            `(batch, query_length, key_length)` (or rank 4 with a heads axis);
            `True` means the query may attend to the key.
        attention_bias: additive float bias broadcastable to
            `(batch, heads, query_length, key_length)`, added to the scaled
            scores before the softmax (relative-position biases plug in
            here). Keep it finite; masking belongs in `attention_mask`.
        use_causal_mask: keep only keys `j <= i`.
        return_attention_scores: also return the attention probabilities,
            `(batch, heads, query_length, key_length)`, before dropout.
        training: whether dropout is active.
        query_mask, value_mask, key_mask: implicit Keras masks, filled in by
            Keras when the layer is called on several tensors; a masked
            query position gets a zero attention result, a masked key is
            never attended to.
        mask: the implicit Keras mask of `query`, filled in by Keras when the
            layer is called on `query` alone; treated as both `query_mask`
            and `value_mask`.

    Every call, eager or symbolic, checks the statically known shapes and
    raises a ValueError naming the inputs and their shapes when: an input is
    not rank 3; batch sizes differ; `key` and `value` lengths differ; a
    feature width differs from the one the layer was built for; or
    `attention_mask` does not broadcast to the scores. (Size-1 dimensions
    are not broadcast.) Lengths unknown while tracing are not checked.

    Masking: all masks are merged; a query row whose keys are all masked gets
    a zero attention result (so with `use_bias=False` its output row is
    exactly zero). The output carries the implicit mask of `query`.

    Example:

    >>> layer = keras_attn.MultiHeadAttention(heads=4, head_size=16, key_size=64)
    >>> x = np.random.rand(2, 10, 64).astype("float32")
    >>> layer(x).shape
    (2, 10, 64)
    """

    def __init__(
        self,
        heads,
        head_size,
        key_size=None,
        out_dim=None,
        use_bias=True,
        attention_dropout=0.0,
        attention_scale=True,
        fused_attention=True,
        attention_window=None,
        blockwise_attention=False,
        position_encoding=None,
        rotary_max_wavelength=10000,
        xpos_scale_base=512,
        log_n_train_length=None,
        kernel_initializer="glorot_uniform",
        bias_initializer="zeros",
        **kwargs,
    ):
        super().__init__(**kwargs)
        if position_encoding not in POSITION_ENCODINGS:
            raise ValueError(
                f"`position_encoding` must be one of {POSITION_ENCODINGS}; "
                f"received {position_encoding!r}."
            )
        check_positive_integer("heads", heads)
        check_positive_integer("head_size", head_size)
        check_positive_integer("key_size", key_size, optional=True)
        check_positive_integer("attention_window", attention_window, optional=True)
        if blockwise_attention and attention_window is None:
            raise ValueError(
                "`blockwise_attention=True` needs `attention_window` (the block "
                "size); received attention_window=None."
            )
        if log_n_train_length is not None and log_n_train_length < 2:
            raise ValueError(
                f"`log_n_train_length` must be at least 2; received {log_n_train_length!r}."
            )
        if not 0.0 <= attention_dropout < 1.0:
            raise ValueError(
                f"`attention_dropout` must be in [0, 1); received {attention_dropout!r}."
            )
        self.heads = heads
        self.head_size = head_size
        self.key_size = key_size or head_size
        self.out_dim = out_dim
        self.use_bias = use_bias
        self.attention_dropout = attention_dropout
        self.attention_scale = attention_scale
        self.fused_attention = fused_attention
        self.attention_window = attention_window
        self.blockwise_attention = blockwise_attention
        self.position_encoding = position_encoding
        self.rotary_max_wavelength = rotary_max_wavelength
        self.xpos_scale_base = xpos_scale_base
        self.log_n_train_length = log_n_train_length
        self._rotary = None
        if position_encoding is not None:
            self._rotary = RotaryEmbedding(
                rotary_max_wavelength,
                scale_base=xpos_scale_base if position_encoding == "xpos" else None,
                dtype=self.dtype_policy,
                name="rotary_embedding",
            )
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.bias_initializer = keras.initializers.get(bias_initializer)
        self.supports_masking = True
        self._dropout = keras.layers.Dropout(
            attention_dropout, dtype=self.dtype_policy, name="attention_dropout"
        )

    # Heads of the query/key and of the value projections. Talking-heads
    # attention overrides these; plain multi-head attention uses `heads` for both.
    @property
    def key_heads(self):
        return self.heads

    @property
    def value_heads(self):
        return self.heads

    def build(self, query_shape, value_shape=None, key_shape=None):
        value_shape = query_shape if value_shape is None else value_shape
        key_shape = value_shape if key_shape is None else key_shape
        self._check_input_shapes(query_shape, value_shape, key_shape)
        out_dim = self.out_dim or query_shape[-1]
        self.query_dense = make_dense(self, self.key_heads * self.key_size, "query_dense")
        self.query_dense.build(query_shape)
        self.key_dense = make_dense(self, self.key_heads * self.key_size, "key_dense")
        self.key_dense.build(key_shape)
        self.value_dense = make_dense(self, self.value_heads * self.head_size, "value_dense")
        self.value_dense.build(value_shape)
        self.output_dense = make_dense(self, out_dim, "output_dense")
        self.output_dense.build(
            tuple(query_shape[:-1]) + (self.value_heads * self.head_size,)
        )
        self.build_heads_mixing()

    def _check_input_shapes(self, query_shape, value_shape, key_shape, mask_shape=None):
        """Raises a ValueError naming the inputs whose statically known
        dimensions disagree: ranks other than 3, batch sizes, key and value
        lengths, feature widths other than those the built kernels take, and
        an `attention_mask` not broadcastable to the scores. Runs at every
        call, not only in `build`: a built layer is reused on new shapes, and
        size-1 dimensions would otherwise broadcast silently."""
        shapes = {"query": tuple(query_shape), "value": tuple(value_shape), "key": tuple(key_shape)}
        for name, shape in shapes.items():
            if len(shape) != 3:
                raise ValueError(
                    f"{self.name}: `{name}` must have rank 3, (batch, length, "
                    f"features); received {name} shape {shape}."
                )

        def differ(a, b):
            return a is not None and b is not None and a != b

        if differ(shapes["key"][1], shapes["value"][1]):
            raise ValueError(
                f"{self.name}: `key` and `value` must have the same length; received "
                f"key shape {shapes['key']} and value shape {shapes['value']}."
            )
        for name in ("value", "key"):
            if differ(shapes[name][0], shapes["query"][0]):
                raise ValueError(
                    f"{self.name}: `{name}` and `query` must have the same batch size; "
                    f"received {name} shape {shapes[name]} and query shape {shapes['query']}."
                )
        if self.built:
            for name, dense in (
                ("query", self.query_dense), ("value", self.value_dense), ("key", self.key_dense)
            ):
                width = dense.kernel.shape[0]
                if differ(shapes[name][-1], width):
                    raise ValueError(
                        f"{self.name} was built for `{name}` with {width} features; "
                        f"received {name} shape {shapes[name]}."
                    )
        if mask_shape is not None:
            mask_shape = tuple(mask_shape)
            batch, query_length, key_length = shapes["query"][0], shapes["query"][1], shapes["key"][1]
            target = {
                2: (query_length, key_length),
                3: (batch, query_length, key_length),
                4: (batch, self.heads, query_length, key_length),
            }.get(len(mask_shape))
            if target is not None and any(
                differ(m, t) and m != 1 for m, t in zip(mask_shape, target)
            ):
                raise ValueError(
                    f"{self.name}: `attention_mask` of shape {mask_shape} does not "
                    f"broadcast to {target} (query length {shapes['query'][1]}, key "
                    f"length {shapes['key'][1]}, {self.heads} heads)."
                )

    def build_heads_mixing(self):
        """Hook for subclasses that add weights between the projections."""

    @property
    def scale(self):
        return 1.0 / math.sqrt(self.key_size) if self.attention_scale else 1.0

    def call(
        self,
        query,
        value=None,
        key=None,
        attention_mask=None,
        attention_bias=None,
        use_causal_mask=False,
        return_attention_scores=False,
        training=None,
        query_mask=None,
        value_mask=None,
        key_mask=None,
        mask=None,
    ):
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
        self._check_call_arguments(query, value, key, attention_mask, use_causal_mask)
        query_shape = ops.shape(query)
        query_heads = self._split_heads(self.query_dense(query), self.key_heads)
        key_heads = self._split_heads(self.key_dense(key), self.key_heads)
        value_heads = self._split_heads(self.value_dense(value), self.value_heads)
        if self._rotary is not None:
            query_heads, key_heads = self._rotary(query_heads, key_heads)

        layout = self._band_layout(
            query, key, attention_mask, attention_bias, use_causal_mask, return_attention_scores
        )
        if layout is not None:
            attended = self._banded_attend(
                query_heads, key_heads, value_heads, layout,
                attention_mask, query_mask, key_mask, use_causal_mask, training,
            )
            scores = None
        else:
            mask = masking.merge_attention_masks(
                attention_mask=attention_mask,
                query_mask=query_mask,
                key_mask=key_mask,
                use_causal_mask=use_causal_mask,
                query_length=ops.shape(query)[1],
                key_length=ops.shape(key)[1],
                attention_window=self.attention_window,
                blockwise=self.blockwise_attention,
            )
            attended, scores = self._attend_heads(
                query_heads, key_heads, value_heads, mask, attention_bias,
                training, return_attention_scores,
            )
        attended = ops.reshape(
            attended, (query_shape[0], query_shape[1], self.value_heads * self.head_size)
        )
        output = self.output_dense(attended)
        if return_attention_scores:
            return output, scores
        return output

    def _check_call_arguments(self, query, value, key, attention_mask, use_causal_mask):
        """The checks of every call, eager or symbolic (see
        `_check_input_shapes`), and of the options that need a causal call."""
        self._check_input_shapes(
            query.shape,
            value.shape,
            key.shape,
            None if attention_mask is None else attention_mask.shape,
        )
        if self.blockwise_attention and not use_causal_mask:
            raise ValueError(
                f"{self.name}: blockwise attention (`blockwise_attention=True`) is "
                "causal; call the layer with `use_causal_mask=True`."
            )
        if self.position_encoding == "xpos" and not use_causal_mask:
            raise ValueError(
                f"{self.name}: `position_encoding='xpos'` is for causal attention "
                "(its decay grows without bound towards later keys); call the layer "
                "with `use_causal_mask=True`, or use `position_encoding='rotary'` "
                "for bidirectional attention."
            )

    def _attend_heads(self, query, key, value, mask, bias, training, return_attention_scores):
        """Log-n scaling, then the fused or the einsum kernel, on
        `(batch, length, heads, size)` heads; returns `(attended, scores)`."""
        if self.log_n_train_length is not None:
            query = query * self._log_n_factor(mask, ops.shape(key)[1])
        if self._can_use_fused_path(training, return_attention_scores):
            return self._fused_attend(query, key, value, mask, bias), None
        return self.attend(query, key, value, mask, bias, training)

    def _band_layout(
        self, query, key, attention_mask, attention_bias, causal, return_attention_scores
    ):
        """The `banded.BandLayout` when the window can be computed blockwise,
        else None (dense masked attention, same numbers).

        Banding needs self-attention lengths, masks that are per key (padding)
        rather than per (query, key) pair, no `(query, key)` bias and no
        returned score matrix; and it pays only when the sequence is longer
        than the keys each query block would see.
        """
        if self.attention_window is None or attention_bias is not None:
            return None
        if return_attention_scores:
            return None
        if attention_mask is not None and not masking.is_key_mask(attention_mask):
            return None
        length = query.shape[1]
        if query is not key and (length is None or length != key.shape[1]):
            return None
        layout = banded.band_layout(
            self.attention_window, causal, blockwise=self.blockwise_attention and causal
        )
        if length is not None and length <= banded.keys_per_query(layout):
            return None
        return layout

    def _banded_attend(
        self, query, key, value, layout, attention_mask, query_mask, key_mask, causal, training
    ):
        """Attention within the window, computed on blocks (see `banded`)."""
        shape = ops.shape(query)
        batch, length = shape[0], shape[1]
        query_valid = key_valid = ops.ones((batch, length), "bool")
        if attention_mask is not None:
            key_valid = ops.logical_and(key_valid, masking.to_rank4_mask(attention_mask)[:, 0, 0, :])
        if key_mask is not None:
            key_valid = ops.logical_and(key_valid, ops.cast(key_mask, "bool"))
        if query_mask is not None:
            query_valid = ops.logical_and(query_valid, ops.cast(query_mask, "bool"))
        mask = banded.blocked_mask(
            layout,
            self.attention_window,
            causal,
            self.blockwise_attention and causal,
            query_valid,
            key_valid,
            length,
        )
        query_layout = banded.BandLayout(layout.block_size, (0,))
        query = banded.fold_blocks(banded.to_blocks(query, query_layout, length))
        key = banded.fold_blocks(banded.to_blocks(key, layout, length))
        value = banded.fold_blocks(banded.to_blocks(value, layout, length))
        attended, _ = self._attend_heads(query, key, value, mask, None, training, False)
        return banded.unfold_blocks(attended, batch, length)

    def _log_n_factor(self, mask, key_length):
        """`max(1, log(n_i) / log(train_length))` per query row, laid out as
        `(batch, query_length, heads, 1)`; `n_i` counts the keys row i sees."""
        if mask is None:
            visible = ops.cast(key_length, "float32")
            visible = ops.reshape(visible, (1, 1, 1))
        else:
            visible = ops.sum(ops.cast(mask, "float32"), axis=-1)  # (batch, heads, query)
        factor = ops.log(ops.maximum(visible, 1.0)) / ops.log(
            ops.cast(self.log_n_train_length, "float32")
        )
        factor = ops.maximum(factor, 1.0)
        return ops.cast(ops.transpose(factor, (0, 2, 1))[..., None], self.compute_dtype)

    @staticmethod
    def _split_heads(projected, heads):
        shape = ops.shape(projected)
        return ops.reshape(projected, (shape[0], shape[1], heads, shape[2] // heads))

    def _can_use_fused_path(self, training, return_attention_scores):
        if not self.fused_attention or return_attention_scores:
            return False
        if training and self.attention_dropout > 0:
            return False
        # JAX's fused kernel requires the value width to equal the key width.
        if self.key_size != self.head_size and keras.config.backend() == "jax":
            return False
        # Under jit, Keras' JAX kernel asks XLA for a float16 x float16 ->
        # float32 dot product, which XLA's CPU backend does not implement
        # ("F16_F16_F32 is not supported by dot_general on CPU").
        if self.compute_dtype == "float16" and jax_runs_on_cpu():
            return False
        return True

    def _fused_attend(self, query, key, value, mask, bias):
        dtype = self.compute_dtype
        if bias is not None:
            bias = ops.cast(bias, dtype)
            while len(bias.shape) < 4:
                bias = bias[None, ...]
            if mask is not None:
                bias = masking.fold_mask_into_bias(mask, bias, dtype)
        if bias is not None:
            attended = ops.dot_product_attention(
                query, key, value, bias=bias, scale=self.scale
            )
        else:
            attended = ops.dot_product_attention(
                query, key, value, mask=mask, scale=self.scale
            )
        if mask is not None:
            attended = ops.where(
                masking.rows_with_any_key(mask), attended, ops.zeros_like(attended)
            )
        return attended

    def attend(self, query, key, value, mask, bias, training):
        """Einsum attention in the `(batch, length, heads, size)` layout.

        Returns the attention result `(batch, query_length, heads, head_size)`
        and the probabilities `(batch, heads, query_length, key_length)`.
        """
        query = query * ops.cast(self.scale, query.dtype)
        logits = ops.einsum("btnh,bsnh->bnts", query, key)
        if bias is not None:
            logits = ops.cast(logits, "float32") + ops.cast(bias, "float32")
        probabilities = ops.cast(
            masking.masked_softmax(logits, mask), self.compute_dtype
        )
        dropped = self._dropout(probabilities, training=training)
        attended = ops.einsum("bnts,bsnh->btnh", dropped, value)
        return attended, probabilities

    def compute_output_shape(self, query_shape, value_shape=None, key_shape=None):
        return tuple(query_shape[:-1]) + (self.out_dim or query_shape[-1],)

    def compute_output_spec(
        self,
        query,
        value=None,
        key=None,
        attention_mask=None,
        use_causal_mask=False,
        return_attention_scores=False,
        **kwargs,
    ):
        # Symbolic calls (functional models, the builder) get the same checks
        # as eager ones, and the scores' spec when they are requested.
        value = query if value is None else value
        key = value if key is None else key
        self._check_call_arguments(query, value, key, attention_mask, use_causal_mask)
        output = keras.KerasTensor(
            self.compute_output_shape(query.shape), dtype=self.compute_dtype
        )
        if not return_attention_scores:
            return output
        scores_shape = (query.shape[0], self.value_heads, query.shape[1], key.shape[1])
        return output, keras.KerasTensor(scores_shape, dtype=self.compute_dtype)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "heads": self.heads,
                "head_size": self.head_size,
                "key_size": self.key_size,
                "out_dim": self.out_dim,
                "attention_dropout": self.attention_dropout,
                "attention_scale": self.attention_scale,
                "fused_attention": self.fused_attention,
                "attention_window": self.attention_window,
                "blockwise_attention": self.blockwise_attention,
                "position_encoding": self.position_encoding,
                "rotary_max_wavelength": self.rotary_max_wavelength,
                "xpos_scale_base": self.xpos_scale_base,
                "log_n_train_length": self.log_n_train_length,
                **projection_config(self),
            }
        )
        return config
