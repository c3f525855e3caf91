"""The Gated Attention Unit: one attention head gating its own values."""

import keras
from keras import ops

from keras_attn.torch_runtime.direct_call import direct_call
from keras_attn.layers.feed_forward import resolve_activation
from keras_attn.layers.attention_options import check_input_shapes
from keras_attn.layers.multi_head_attention import MultiHeadAttention
from keras_attn.layers.multi_head_attention import check_positive_integer
from keras_attn.layers.projections import merge_heads
from keras_attn.layers.projections import split_heads
from keras_attn.layers.projections import make_dense

# `MultiHeadAttention` arguments a GAU fixes: one head, values as wide as
# `units` and not rotated (`rotary_value` is the former spelling of a
# `Rotary` position's `rotate_values`).
FIXED_ARGUMENTS = ("heads", "head_size", "rotary_value")


@keras.saving.register_keras_serializable(package="keras_attn")
class GatedAttentionUnit(MultiHeadAttention):
    """Gated Attention Unit (GAU): single-head self-attention whose result
    is gated by a second projection of the input, in place of a block's
    attention and feed-forward together.

    Hua, Dai, Liu, Le (2022), "Transformer Quality in Linear Time",
    https://arxiv.org/abs/2202.10447, as bert4keras's `GatedAttentionUnit`
    computes it (Su 2022, https://kexue.fm/archives/8934). For the rows `x_i`
    of the input:

        [u_i, v_i, z_i] = act(x_i W_i + b_i)     split into units, units, key_size
        q_i = z_i * gamma_q + beta_q             (per feature)
        k_i = z_i * gamma_k + beta_k
        q_i, k_i = RoPE(q_i), RoPE(k_i)          (with position=Rotary())
        A_ij = normalize_j(q_i . k_j / sqrt(key_size))   (masked)
        out_i = (u_i * sum_j A_ij v_j) W_o + b_o

    The normalisations, for a query that sees `n` keys (0 where masked):

    - `"squared_relu"` (the paper's): `A_ij = relu(a_ij)^2 / n`;
    - `"softmax"`: `A_ij = softmax_j(a_ij)`;
    - `"softmax_plus"` (GAU-alpha's; Su 2022,
      https://kexue.fm/archives/8823): `A_ij = softmax_j(a_ij * log(max(n,
      16)) / log(512))`, so attention keeps its entropy on lengths other
      than the training length of 512.

    `n` counts the keys the query row sees under the merged mask (padding,
    causal or seq2seq mask, window), so a cached decoding step equals the
    full pass (bert4keras counts every unpadded key under a causal mask).

    The layer is a `keras_attn.MultiHeadAttention` with one head of
    `head_size = units` and `key_size`, whose projections are GAU's; the
    kernel, masking, RoPE, windows and cached decoding are the base layer's.
    It attends within its input only: `value` or `key` other than `query` is
    a ValueError, and so are `project_key_value` and `attend_projected`.

    Weights: `input_dense` (`d_in x (2 units + key_size)`, bert4keras's
    `i_dense`), `query_scale`/`key_scale` (`gamma_q`, `gamma_k`, initialised
    to ones), `query_offset`/`key_offset` (`beta_q`, `beta_k`, zeros, only
    with `use_bias`), `output_dense` (`units x out_dim`, `o_dense`); the two
    dense layers have biases only with `use_bias`.

    Args:
        units: width of `u` and `v` (the gate and the values).
        key_size: width of the shared `z`, queries and keys.
        activation: the activation of `input_dense`, a Keras activation
            name or callable; `"swish"` (SiLU) as in the paper.
        normalization: `"squared_relu"` (default, the paper's), `"softmax"`
            or `"softmax_plus"`; any other value is a ValueError naming these.
        use_bias: biases of both projections and the offsets `beta_q`,
            `beta_k`.
        **kwargs: every other `keras_attn.MultiHeadAttention` argument but
            `heads` and `head_size` (`out_dim`, `attention_dropout`,
            `attention_scale`, `fused_attention`, `attention_window`,
            `position`, without `rotate_values`, `log_n_train_length`,
            initializers, `name`, `dtype`).

    Call arguments: as `keras_attn.MultiHeadAttention` without `value` and
    `key`. With `return_attention_scores=True` the weights `A` come back as
    `(batch, 1, query_length, key_length)`.

    Masking: as `keras_attn.MultiHeadAttention`; a query whose keys are all
    masked has `sum_j A_ij v_j = 0` (its output is `b_o`, or 0 without
    biases). The output carries the implicit mask of `query`.

    Example:

    >>> layer = keras_attn.layers.GatedAttentionUnit(
    ...     units=48, key_size=16, normalization="softmax_plus",
    ...     position=keras_attn.layers.Rotary())
    >>> x = np.random.rand(2, 10, 32).astype("float32")
    >>> layer(x, use_causal_mask=True).shape
    (2, 10, 32)
    """

    dense_projections = ("input_dense", "output_dense")

    def __init__(
        self,
        units,
        key_size,
        activation="swish",
        normalization="squared_relu",
        use_bias=True,
        **kwargs,
    ):
        for name in FIXED_ARGUMENTS:
            if name in kwargs:
                raise ValueError(
                    "GatedAttentionUnit has one head whose values are `units` wide and "
                    f"are not rotated; received {name}={kwargs[name]!r}."
                )
        if getattr(kwargs.get("position"), "rotate_values", False):
            raise ValueError(
                "GatedAttentionUnit's values are not rotated; received "
                f"position={kwargs['position']!r}."
            )
        check_positive_integer("units", units)
        check_positive_integer("key_size", key_size)
        super().__init__(
            heads=1,
            head_size=units,
            key_size=key_size,
            use_bias=use_bias,
            normalization=normalization,
            **kwargs,
        )
        self.units = units
        self.activation = activation

    def build(self, query_shape, value_shape=None, key_shape=None):
        check_input_shapes(self, query_shape, query_shape, query_shape)
        self.input_dense = make_dense(
            self, 2 * self.units + self.key_size, "input_dense",
            activation=resolve_activation(self.activation),
        )
        self.input_dense.build(query_shape)
        for name, initializer in (("query_scale", "ones"), ("key_scale", "ones")) + (
            (("query_offset", "zeros"), ("key_offset", "zeros")) if self.use_bias else ()
        ):
            setattr(self, name, self.add_weight(name=name, shape=(self.key_size,),
                                                initializer=initializer))
        self.output_dense = make_dense(self, self.out_dim or query_shape[-1], "output_dense")
        self.output_dense.build(tuple(query_shape[:-1]) + (self.units,))
        self._build_attention_sinks()

    def _built_input_widths(self):
        width = self.input_dense.kernel.shape[0]
        return {"query": width, "value": width, "key": width}

    def _scale_offset(self, shared, role):
        """`z * gamma (+ beta)` for `role` `"query"` or `"key"`."""
        scaled = shared * ops.cast(getattr(self, f"{role}_scale"), shared.dtype)
        if self.use_bias:
            scaled = scaled + ops.cast(getattr(self, f"{role}_offset"), shared.dtype)
        return scaled

    def _project_heads(self, query, key, value):
        projected = direct_call(self.input_dense, query)
        # Slices, not `ops.split`: Keras' torch split turns a list of indices
        # into a tensor and reads it back, a graph break under torch.compile.
        units = self.units
        gate, values, shared = (
            projected[..., :units], projected[..., units:2 * units], projected[..., 2 * units:]
        )
        return (
            split_heads(self._scale_offset(shared, "query"), self.key_size),
            split_heads(self._scale_offset(shared, "key"), self.key_size),
            split_heads(values, self.units),
            gate,
        )

    def _project_output(self, attended, gate):
        return direct_call(self.output_dense, gate * merge_heads(attended, self.units))

    def _check_call_arguments(self, query, value, key, attention_mask, use_causal_mask,
                              rotary_tables=None):
        if value is not query or key is not query:
            raise ValueError(
                f"{self.name}: a GatedAttentionUnit attends within its input (its "
                "queries, keys and values share one projection); call it without "
                "`value` and `key`."
            )
        super()._check_call_arguments(query, value, key, attention_mask, use_causal_mask,
                                      rotary_tables)

    def project_key_value(self, value, key=None):
        raise ValueError(
            f"{self.name}: a GatedAttentionUnit is self-attention only; it has no "
            "keys and values of another sequence to project."
        )

    def attend_projected(self, query, key_value, attention_mask=None, training=None):
        self.project_key_value(None)

    def get_config(self):
        config = super().get_config()
        for name in FIXED_ARGUMENTS:
            config.pop(name, None)
        config.update(
            {
                "units": self.units,
                "activation": (
                    self.activation if isinstance(self.activation, str)
                    else keras.activations.serialize(self.activation)
                ),
            }
        )
        return config
