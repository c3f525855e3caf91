"""Multi-head attention with a per-head query/key width decoupled from the
value width."""

import dataclasses
import math

import keras
from keras import ops

from keras_attn import keras_internals
from keras_attn.layers import banded
from keras_attn.layers import masking
from keras_attn.torch_runtime.direct_call import direct_call
from keras_attn.layers.functional_relative_position import FunctionalRelativePosition
from keras_attn.layers.functional_relative_position import check_max_relative_position
from keras_attn.layers.relative_position_bias import add_distance_bias
from keras_attn.layers.dot_product_attention import DotProductAttention
from keras_attn.layers.dot_product_attention import check_soft_cap
from keras_attn.layers.key_value_cache import KeyValueCache
from keras_attn.layers.projections import make_dense
from keras_attn.layers.projections import projection_config
from keras_attn.layers.rerope import ClippedRotaryLogits
from keras_attn.layers.rms_normalization import RMSNormalization
from keras_attn.layers.rope_scaling import CLIPPED_TYPES
from keras_attn.layers.rope_scaling import rotary_width_error
from keras_attn.layers.rope_scaling import standard_rope_scaling
from keras_attn.layers.rotary_embedding import ROTARY_LAYOUTS
from keras_attn.layers.rotary_embedding import RotaryEmbedding

POSITION_ENCODINGS = (None, "rotary", "xpos", "functional_relative")
ROTARY_ENCODINGS = ("rotary", "xpos")


def check_positive_integer(argument, value, optional=False):
    """Raises a ValueError naming `argument` unless `value` is a positive
    integer (or None, when `optional`)."""
    if optional and value is None:
        return
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        allowed = "a positive integer or None" if optional else "a positive integer"
        raise ValueError(f"`{argument}` must be {allowed}; received {value!r}.")


def split_heads(projected, size):
    """`(batch, length, heads * size)` -> `(batch, length, heads, size)`."""
    shape = ops.shape(projected)
    return keras_internals.reshape(projected, (shape[0], shape[1], -1, size))


def merge_heads(attended, width):
    """`(batch, length, heads, size)` -> `(batch, length, width)`, where
    `width = heads * size` is passed statically (a traced kernel may not
    know it)."""
    shape = ops.shape(attended)
    return keras_internals.reshape(attended, (shape[0], shape[1], width))


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

    Grouped-query attention (Ainslie et al., 2023, "GQA: Training
    Generalized Multi-Query Transformer Models from Multi-Head Checkpoints",
    https://arxiv.org/abs/2305.13245; LLaMA 2-3, Mistral, Qwen): with
    `key_value_heads` `g` < `heads`, the keys and values have `g` heads and
    query head `n` reads key/value head `n // (heads / g)` (Hugging Face's
    `repeat_kv`); `g = 1` is multi-query attention. The same move as the
    decoupled `key_size`: the number of key/value heads is independent of the
    number of query heads. A `KeyValueCache` stores the `g` heads only.

    Parameters, exactly: query kernel `d_in x heads*key_size`, key kernel
    `d_in x key_value_heads*key_size`, value kernel
    `d_in x key_value_heads*head_size`, output kernel
    `heads*head_size x out_dim`, each with a bias when `use_bias` (the
    output's when `output_use_bias`).

    The layer reads: project, rotate (`position_encoding`) at the positions
    of the queries and keys, update the cache if any, attend, project out:
    one computation for the full pass, a cached decoding step and
    `attend_projected`. Attending is the kernel `keras_attn.layers.dot_product_attention.
    DotProductAttention`, called on the whole score matrix or, with
    `attention_window`, on blocks of it (`keras_attn.layers.banded`).

    Where possible the kernel calls the backend's fused attention
    (`keras.ops.dot_product_attention`; on torch
    `scaled_dot_product_attention` itself): whenever `fused_attention` allows
    it, attention dropout is inactive for the call (`training` falsy, or
    `attention_dropout=0`), no scores are requested, the position encoding
    is not `"functional_relative"` (which adds terms a fused kernel cannot),
    and the computation is not float16 on JAX's CPU backend (XLA's CPU
    backend lacks the mixed-precision product that kernel asks for under
    jit). Decoupled widths (`key_size != head_size`) need the narrower heads
    zero-padded (which changes no dot product) and are fused by default only
    where that was measured faster than the einsum path
    (`dot_product_attention.fuses_decoupled_widths`: torch; on JAX and
    TensorFlow it was 3-6% slower). Otherwise the
    kernel takes an einsum path with the softmax in float32. Both paths give
    the same numbers, including zero rows for fully masked queries.

    Args:
        heads: number of attention heads.
        head_size: per-head width of the value projection.
        key_size: per-head width of the query and key projections; defaults
            to `head_size`. Scores are scaled by `1 / sqrt(key_size)`.
            Rotary positions need it even (above 2 under `ntk` or `dynamic`
            scaling; `rope_scaling.rotary_width_error`), checked here.
        key_value_heads: number of key/value heads, a divisor of `heads`
            (grouped-query attention); defaults to `heads`.
        out_dim: width of the output; defaults to the last dimension of
            `query`.
        use_bias: whether the four projections have biases.
        output_use_bias: whether the output projection has a bias; None
            (default): `use_bias` (Qwen2 has query/key/value biases and
            none on the output).
        query_key_norm_epsilon: None, or the epsilon of an RMS norm of each
            query and key head (over `key_size`, with a learned scale,
            sublayers `query_norm` and `key_norm`) applied after the
            projection and before the rotary positions (Qwen3's `q_norm`
            and `k_norm`).
        query_key_norm_scale_offset: added to those norms' learned scales
            (see `keras_attn.layers.RMSNormalization`'s `scale_offset`):
            Gemma 3's `1 + w` norms take 1.0. Default 0.
        rotary_layout: which query/key features RoPE rotates together:
            `"interleaved"` (`2m, 2m + 1`, RoFormer's) or `"half"` (`m, m +
            key_size / 2`, LLaMA's `rotate_half`); see `RotaryEmbedding`.
        attention_dropout: dropout rate applied to the attention
            probabilities during training.
        attention_scale: whether to scale scores by `1 / sqrt(key_size)`
            (True, the default, or False), or the factor itself, a positive
            number (GPT-2's `scale_attn_by_inverse_layer_idx` gives block
            `i` the factor `1 / (sqrt(key_size) * (i + 1))`).
        attention_logit_soft_cap: None, or `c > 0`: each score becomes
            `c tanh(score / c)` before the bias and the mask (Gemma 2's
            `attn_logit_softcapping`; see `DotProductAttention`), in every
            pass; such a layer takes the einsum path.
        fused_attention: None (the default) takes the fused path where it
            applies and, for decoupled widths, where it is the faster one;
            True takes it for decoupled widths too (zero-padded); False
            forces the einsum path (numerically the same).
        attention_window: attend only within a local window of this size
            (the `LocalMaskBaseline` band: `i - window < j <= i` under a
            causal mask, `|i - j| <= window // 2` otherwise).
        attention_sink_tokens: with `attention_window`, the number `k` of
            first positions every query also sees (keys `j < k`, and `j <= i`
            under a causal mask): StreamingLLM's sink tokens (Xiao et al.
            2023, https://arxiv.org/abs/2309.17453), kept beside the window
            at their original positions (RoPE rotates them where they are;
            StreamingLLM renumbers the cache instead). A decoding cache then
            holds `k` slots for them beside the window's ring
            (`keras_attn.generation.CachedForward`). Default 0; a negative
            number, `k > 0` without a window or with `blockwise_attention`
            is a ValueError. Such a layer's full pass takes the dense masked
            path (the band's blocks have no room for the sink keys).
        attention_sinks: learn one sink logit per head (`heads`, the weight
            `sink_logits`, initialised to zeros), which joins each query
            row's softmax as an extra column and is dropped (gpt-oss's
            attention sinks; see `DotProductAttention`): a row's weights sum
            to `1 - exp(s) / (exp(s) + sum_j exp(a_ij))`, so a head may
            attend to nothing. Such a layer takes the einsum path (a fused
            kernel has no sink column), in the full pass, on banded blocks
            and in cached decoding alike. No pretrained checkpoint format
            this library reads holds them: the weight is declared
            checkpoint-free (`checkpoint_free_weights`) and keeps its initial
            value when a checkpoint is loaded.
        blockwise_attention: use XPOS's blockwise causal attention instead of
            a sliding window: blocks of `attention_window` positions, each
            query seeing its own block and the previous one. Requires
            `attention_window` (a ValueError otherwise) and a call with
            `use_causal_mask=True` (a ValueError at call time otherwise).
        position_encoding: `None`, `"rotary"` (RoPE on queries and keys) or
            `"xpos"` (RoPE with XPOS's decay; causal only: a call without
            `use_causal_mask=True` raises a ValueError); see
            `keras_attn.layers.RotaryEmbedding`; or `"functional_relative"`
            (NEZHA: fixed sinusoid embeddings of the clipped distance added
            to the keys and the values, see
            `keras_attn.layers.FunctionalRelativePosition`; einsum path only,
            in the full pass, banded windows and cached decoding).
        max_relative_position: the distance where `"functional_relative"`
            clips (NEZHA's `max_relative_position`, 64); a positive integer.
        rotary_max_wavelength: RoPE's base.
        rotary_scaling: a rope scaling of the rotary frequencies, a dict such
            as `{"rope_type": "yarn", "factor": 4.0,
            "original_max_position_embeddings": 512}` (see
            `RotaryEmbedding`'s `scaling`); needs a rotary `position_encoding`.
        rotary_value: also rotate the values by their positions (Hugging
            Face RoFormer's `rotary_value`), so the output of head `n` at
            `i` is `sum_j a_ij R_j v_j`; needs `position_encoding="rotary"`.
        xpos_scale_base: XPOS's scale base.
        log_n_train_length: log-n attention scaling (Chiang & Cholak 2022,
            "Overcoming a Theoretical Limitation of Self-Attention",
            https://arxiv.org/abs/2202.12172; Su 2021): scores of a query that
            sees `n` keys are multiplied by `max(1, log(n) / log(train_length))`,
            which keeps attention entropy from growing on sequences longer
            than the training length. `None` turns it off.
        normalization: how scores become attention weights: `"softmax"`
            (default), `"squared_relu"` (`relu(a)^2 / n`) or `"softmax_plus"`
            (`softmax(a * log(max(n, 16)) / log(512))`), `n` the number of
            keys the query sees; see `keras_attn.layers.GatedAttentionUnit`,
            where they come from. Any other value is a ValueError naming
            these.
        kernel_initializer: initializer of the four kernels.
        bias_initializer: initializer of the four biases.
        projection_policies: dtype policies of single projections by
            sublayer name (`{"query_dense": "int8_from_float32"}`); the rest
            use the layer's policy. `model.quantize("int8")` quantizes the
            projections and the config records them here, so a saved
            quantized model reloads; there is rarely a reason to pass it.
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
            scores before the softmax. Keep it finite; masking belongs in
            `attention_mask`.
        distance_bias: an additive bias that depends on `i - j` only, given
            once per distance: `(batch, heads, query_length + key_length - 1)`
            (batch and heads may be 1), entry `k` the bias of
            `i - j = k - (key_length - 1)`; what a `RelativePositionBias`
            (ALiBi, KERPLE, Sandwich) returns with `by_distance=True`. Added
            like `attention_bias`, but a windowed layer computes it for the
            blocks of its band only, so relative-position biases keep
            attention linear in the length.
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
        cache: a `keras_attn.layers.KeyValueCache`, for autoregressive
            decoding: `query` holds the new tokens, their keys and values
            are written into the cache at `cache_step` (a
            `keras_attn.layers.CacheStep`), and the queries attend to the
            cache's slots that `attention_mask` (`(batch, n, capacity)`)
            keeps, with `attention_bias` and `distance_bias` added; in a
            cached call `distance_bias` covers the distances `-(n - 1) ..
            capacity - 1`, `(batch, heads, capacity + n - 1)` (what
            `RelativePositionBias.distance_table(capacity, n)` gives), and is
            gathered at the slots' distances. The call then returns
            `(output, updated_cache)`. Keys are cached after RoPE's rotation
            at their absolute positions; XPOS's decay is applied at each step
            relative to the newest query.
        cache_step: where the new tokens go (see `CacheStep`).

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

    # The `Dense` sublayers (LoRA adapts them, `keras_attn.lora`).
    dense_projections = ("query_dense", "key_dense", "value_dense", "output_dense")

    def __init__(
        self,
        heads,
        head_size,
        key_size=None,
        out_dim=None,
        use_bias=True,
        key_value_heads=None,
        output_use_bias=None,
        query_key_norm_epsilon=None,
        query_key_norm_scale_offset=0.0,
        rotary_layout="interleaved",
        attention_dropout=0.0,
        attention_scale=True,
        fused_attention=None,
        attention_window=None,
        blockwise_attention=False,
        position_encoding=None,
        rotary_max_wavelength=10000,
        rotary_scaling=None,
        rotary_value=False,
        xpos_scale_base=512,
        log_n_train_length=None,
        max_relative_position=64,
        kernel_initializer="glorot_uniform",
        bias_initializer="zeros",
        projection_policies=None,
        normalization="softmax",
        attention_logit_soft_cap=None,
        attention_sinks=False,
        attention_sink_tokens=0,
        **kwargs,
    ):
        super().__init__(**kwargs)
        if position_encoding not in POSITION_ENCODINGS:
            raise ValueError(
                f"`position_encoding` must be one of {POSITION_ENCODINGS}; "
                f"received {position_encoding!r}."
            )
        if rotary_value and position_encoding != "rotary":
            raise ValueError(
                "`rotary_value=True` rotates the values as RoPE rotates the keys and "
                "needs position_encoding='rotary'; received "
                f"position_encoding={position_encoding!r}."
            )
        if rotary_scaling is not None and position_encoding not in ROTARY_ENCODINGS:
            raise ValueError(
                "`rotary_scaling` rescales the frequencies of rotary positions and needs "
                f"position_encoding in {ROTARY_ENCODINGS}; received "
                f"position_encoding={position_encoding!r}."
            )
        standard_scaling = standard_rope_scaling(rotary_scaling)
        clipped = (standard_scaling or {}).get("rope_type") in CLIPPED_TYPES
        if clipped and (position_encoding != "rotary" or rotary_value):
            raise ValueError(
                f"rope_type {rotary_scaling.get('rope_type', rotary_scaling.get('type'))!r} "
                "clips the relative positions of rotary scores and needs "
                "position_encoding='rotary' without `rotary_value`; received "
                f"position_encoding={position_encoding!r}, rotary_value={rotary_value!r}."
            )
        check_positive_integer("heads", heads)
        check_positive_integer("head_size", head_size)
        if rotary_value and head_size % 2:
            raise ValueError(
                "`rotary_value=True` rotates value features in pairs and needs an even "
                f"`head_size`; received head_size={head_size}."
            )
        check_positive_integer("key_size", key_size, optional=True)
        if position_encoding in ROTARY_ENCODINGS:
            error = rotary_width_error(key_size or head_size, standard_scaling)
            if error:
                given = f"key_size={key_size}" if key_size else (
                    f"key_size=None, so head_size={head_size}"
                )
                raise ValueError(
                    f"MultiHeadAttention(position_encoding={position_encoding!r}): {error}; "
                    f"received {given}."
                )
        check_positive_integer("key_value_heads", key_value_heads, optional=True)
        if key_value_heads is not None and heads % key_value_heads:
            raise ValueError(
                f"`heads` must be a multiple of `key_value_heads` (each key/value head "
                f"serves heads / key_value_heads query heads); received heads={heads} "
                f"and key_value_heads={key_value_heads}."
            )
        if rotary_layout not in ROTARY_LAYOUTS:
            raise ValueError(
                f"`rotary_layout` must be one of {ROTARY_LAYOUTS}; received {rotary_layout!r}."
            )
        if query_key_norm_epsilon is not None and not (
            isinstance(query_key_norm_epsilon, (int, float))
            and not isinstance(query_key_norm_epsilon, bool)
            and query_key_norm_epsilon > 0
        ):
            raise ValueError(
                "`query_key_norm_epsilon` must be None or a positive number; received "
                f"{query_key_norm_epsilon!r}."
            )
        check_max_relative_position(max_relative_position)
        check_soft_cap("attention_logit_soft_cap", attention_logit_soft_cap)
        check_positive_integer("attention_window", attention_window, optional=True)
        check_sink_tokens(attention_sink_tokens, attention_window, blockwise_attention)
        if not isinstance(attention_sinks, bool):
            raise ValueError(
                "`attention_sinks` must be True or False (whether each head learns a "
                f"sink logit); received {attention_sinks!r}."
            )
        if blockwise_attention and attention_window is None:
            raise ValueError(
                "`blockwise_attention=True` needs `attention_window` (the block "
                "size); received attention_window=None."
            )
        if log_n_train_length is not None and log_n_train_length < 2:
            raise ValueError(
                f"`log_n_train_length` must be at least 2; received {log_n_train_length!r}."
            )
        if not isinstance(attention_scale, bool) and not (
            isinstance(attention_scale, (int, float)) and 0 < attention_scale < math.inf
        ):
            raise ValueError(
                "`attention_scale` must be True, False or a positive number (the factor "
                f"of the scores); received {attention_scale!r}."
            )
        if not 0.0 <= attention_dropout < 1.0:
            raise ValueError(
                f"`attention_dropout` must be in [0, 1); received {attention_dropout!r}."
            )
        # Shapes of the projections.
        self.heads, self.head_size, self.out_dim = heads, head_size, out_dim
        self.key_size = key_size or head_size
        self.key_value_heads = key_value_heads or heads
        self.use_bias = use_bias
        self.output_use_bias = output_use_bias
        self.query_key_norm_epsilon = query_key_norm_epsilon
        self.query_key_norm_scale_offset = query_key_norm_scale_offset
        self.attention_logit_soft_cap = attention_logit_soft_cap
        self.rotary_layout = rotary_layout
        # The kernel's options.
        self.attention_dropout, self.attention_scale = attention_dropout, attention_scale
        self.fused_attention = fused_attention
        self.log_n_train_length = log_n_train_length
        self.normalization = normalization
        # Which keys each query sees, and where it sits.
        self.attention_window = attention_window
        self.attention_sink_tokens = attention_sink_tokens
        self.blockwise_attention = blockwise_attention
        self.position_encoding = position_encoding
        self.rotary_max_wavelength = rotary_max_wavelength
        self.rotary_scaling = rotary_scaling
        self.rotary_value = rotary_value
        self.xpos_scale_base = xpos_scale_base
        self.max_relative_position = max_relative_position
        self._rotary = None
        if position_encoding in ROTARY_ENCODINGS:
            self._rotary = RotaryEmbedding(
                rotary_max_wavelength,
                scale_base=xpos_scale_base if position_encoding == "xpos" else None,
                # ReRoPE's frequencies are RoPE's; its clipping is in the scores.
                scaling=None if clipped else rotary_scaling,
                layout=rotary_layout,
                dtype=self.dtype_policy,
                name="rotary_embedding",
            )
        # ReRoPE / Leaky ReRoPE: the kernel computes the scores of unrotated
        # heads (`keras_attn.layers.rerope`); None otherwise.
        self._clipped_rotary = (
            ClippedRotaryLogits.from_scaling(self._rotary, standard_scaling)
            if clipped else None
        )
        self.query_norm = self.key_norm = None
        if query_key_norm_epsilon is not None:
            self.query_norm, self.key_norm = (
                RMSNormalization(
                    epsilon=query_key_norm_epsilon, scale_offset=query_key_norm_scale_offset,
                    dtype=self.dtype_policy, name=name,
                )
                for name in ("query_norm", "key_norm")
            )
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.bias_initializer = keras.initializers.get(bias_initializer)
        self.projection_policies = projection_policies
        self.supports_masking = True
        self._dropout = keras.layers.Dropout(
            attention_dropout, dtype=self.dtype_policy, name="attention_dropout"
        )
        self._kernel = DotProductAttention(
            scale=_score_scale(attention_scale, self.key_size),
            dropout=self._dropout,
            fused=fused_attention,
            log_n_train_length=log_n_train_length,
            relative_position=self._make_relative_position(),
            position_logits=self._clipped_rotary,
            normalization=normalization,
            logit_soft_cap=attention_logit_soft_cap,
        )
        # The sink logits are created in `_build_projections` and handed to
        # the kernel there.
        self.attention_sinks = attention_sinks
        self.sink_logits = None
        if attention_sinks:
            if normalization == "squared_relu":
                raise ValueError(
                    "`attention_sinks=True` adds a column to the softmax; "
                    "normalization='squared_relu' has none."
                )
            self.checkpoint_free_weights = (
                tuple(getattr(type(self), "checkpoint_free_weights", ())) + ("sink_logits",)
            )

    def _make_relative_position(self):
        """The `FunctionalRelativePosition` of `"functional_relative"`, or None."""
        if self.position_encoding != "functional_relative":
            return None
        return FunctionalRelativePosition(
            self.max_relative_position, dtype=self.dtype_policy, name="relative_position"
        )

    def build(self, query_shape, value_shape=None, key_shape=None):
        self._build_projections(
            query_shape, value_shape, key_shape, self.heads, self.key_value_heads,
            self.key_value_heads,
        )

    def _build_projections(
        self, query_shape, value_shape, key_shape, query_heads, key_heads, value_heads
    ):
        """The four projections: `query_heads` and `key_heads` heads of
        `key_size` for queries and keys, `value_heads` heads of `head_size`
        for values, and the output projection of the `self.value_heads`
        heads of the attention result; and the query/key norms."""
        value_shape = query_shape if value_shape is None else value_shape
        key_shape = value_shape if key_shape is None else key_shape
        self._check_input_shapes(query_shape, value_shape, key_shape)
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
        """With `attention_sinks`, the `(heads,)` weight `sink_logits`,
        handed to the kernel: one per head of the scores the softmax sees
        (talking heads': after their mixing, `heads` as well). Every
        subclass's `build` calls it."""
        if not self.attention_sinks:
            return
        self.sink_logits = self.add_weight(
            name="sink_logits", shape=(self.heads,), initializer="zeros"
        )
        self._kernel = dataclasses.replace(self._kernel, sink_logits=self.sink_logits)

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
            for name, width in self._built_input_widths().items():
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
        return {
            "query": self.query_dense.kernel.shape[0],
            "value": self.value_dense.kernel.shape[0],
            "key": self.key_dense.kernel.shape[0],
        }

    def _project_heads(self, query, key, value):
        """`(query_heads, key_heads, value_heads, gate)`: the projections in
        the `(batch, length, heads, size)` layout (the keys and values with
        `key_value_heads` heads), before any rotation, and what
        `_project_output` multiplies the attention result by (None here; a
        `GatedAttentionUnit`'s `u`). Sublayers are called by `direct_call`
        (their `call` on torch, without `__call__`'s overhead)."""
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
        """`keys` and `values` with each of their `key_value_heads` heads
        repeated for the `heads / key_value_heads` query heads it serves
        (Hugging Face's `repeat_kv`); unchanged without grouping. Repeated
        at attention time, after the cache, so the cache holds the
        key/value heads only."""
        groups = self.heads // self.key_value_heads
        if groups == 1:
            return keys, values
        return ops.repeat(keys, groups, axis=2), ops.repeat(values, groups, axis=2)

    def empty_cache(self, batch, capacity):
        """A `KeyValueCache` of zeros for `capacity` positions of `batch`
        rows: the heads the layer's keys and values are projected to
        (`key_value_heads` of each), in its compute dtype."""
        return KeyValueCache.empty(
            batch, capacity, self.key_value_heads, self.key_size,
            self.key_value_heads, self.head_size, self.compute_dtype,
        )

    def _project_output(self, attended, gate):
        """The output projection of the attention result `(batch, length,
        heads, head_size)`."""
        return direct_call(self.output_dense, merge_heads(attended, self.value_heads * self.head_size))

    def call(
        self,
        query,
        value=None,
        key=None,
        attention_mask=None,
        attention_bias=None,
        distance_bias=None,
        use_causal_mask=False,
        return_attention_scores=False,
        training=None,
        query_mask=None,
        value_mask=None,
        key_mask=None,
        mask=None,
        cache=None,
        cache_step=None,
    ):
        if cache is not None:
            if cache_step is None:
                raise ValueError(
                    f"{self.name}: a call with `cache=` needs `cache_step` (a "
                    "`keras_attn.layers.CacheStep` saying where the new tokens go). To "
                    "attend to keys and values computed once (an encoder's output, "
                    "see `project_key_value`), use `attend_projected`."
                )
            # The caller's mask over the slots holds causality, the window
            # and padding, from the slots' positions.
            self._check_call_arguments(query, query, query, None, use_causal_mask=True)
            output, _, cache = self._attend(
                self._project_heads(query, query, query), cache_step.positions,
                cache_step.key_positions, masking.merge_attention_masks(attention_mask),
                attention_bias, distance_bias, training,
                cache=cache, step=cache_step,
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
        self._check_call_arguments(query, value, key, attention_mask, use_causal_mask)
        query_length, key_length = ops.shape(query)[1], ops.shape(key)[1]
        layout = None
        if not self.attention_sink_tokens:
            layout = banded.layout_for_call(
                self.attention_window, self.blockwise_attention, use_causal_mask,
                query, key, attention_mask, attention_bias, distance_bias,
                return_attention_scores,
            )
        if layout is None:
            band = None
            mask = masking.merge_attention_masks(
                attention_mask=attention_mask, query_mask=query_mask, key_mask=key_mask,
                use_causal_mask=use_causal_mask, query_length=query_length,
                key_length=key_length, attention_window=self.attention_window,
                blockwise=self.blockwise_attention, sink_tokens=self.attention_sink_tokens,
            )
        else:
            mask = None

            def band(query_heads, key_heads, value_heads):
                return banded.attend(
                    self._kernel, layout, self.attention_window, self.blockwise_attention,
                    use_causal_mask, query_heads, key_heads, value_heads,
                    attention_mask, query_mask, key_mask, distance_bias, training,
                )
        output, scores, _ = self._attend(
            self._project_heads(query, key, value),
            ops.arange(query_length, dtype="int32"), ops.arange(key_length, dtype="int32"),
            mask, attention_bias, distance_bias, training, return_attention_scores, band=band,
        )
        if return_attention_scores:
            return output, scores
        return output

    def _attend(
        self, heads, query_positions, key_positions, mask, attention_bias=None,
        distance_bias=None, training=None, return_scores=False, cache=None, step=None,
        band=None,
    ):
        """The attention of the full pass, a cached step and `attend_projected`,
        from `_project_heads`' `(queries, keys, values, gate)`: rotate the
        queries at `query_positions` and the new keys and values at theirs
        (`key_positions`, or in a cached step the queries'); write them into
        `cache` at `step`, if any, and read every slot (at `key_positions`);
        apply XPOS's decay; attend under `mask` (or on the blocks of `band`),
        the bias tables, ReRoPE and functional relative positions taking the
        distances `i - j` of the positions; project out. Positions None (keys
        and values projected once, `project_key_value`) rotate nothing and
        count distances from 0. Returns `(output, scores, cache)`."""
        query_heads, key_heads, value_heads, gate = heads
        rotary = self._rotary is not None and query_positions is not None
        new_positions = key_positions if step is None else step.rotation_positions
        if rotary and self._clipped_rotary is None:
            query_heads, key_heads = self._rotary.rotate_pair(
                query_heads, key_heads,
                query_positions if step is None else new_positions, new_positions,
            )
        if rotary and self.rotary_value:
            value_heads = self._rotary.rotate(value_heads, new_positions, values=True)
        if cache is not None:
            cache = cache.write(key_heads, value_heads, step)
            key_heads, value_heads = cache
        if rotary:
            query_heads, key_heads = self._rotary.decay_pair(
                query_heads, key_heads, query_positions, key_positions, cached=step is not None
            )
        key_heads, value_heads = self._share_key_value_heads(key_heads, value_heads)
        if band is not None:
            return self._project_output(band(query_heads, key_heads, value_heads), gate), None, cache
        distance = None
        reads_distances = self.position_encoding == "functional_relative" or self._clipped_rotary
        if distance_bias is not None or reads_distances:
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

    def project_key_value(self, value, key=None):
        """The keys and values of `value` (and `key`, default `value`),
        `(batch, length, width)`, as a `KeyValueCache` for
        `attend_projected`: a cross-attention's projections of an encoder's
        output, computed once per source for every decoding step. Rotary
        encodings (which need positions) are not applied."""
        key = value if key is None else key
        return KeyValueCache(
            self._project_keys(key),
            split_heads(direct_call(self.value_dense, value), self.head_size),
        )

    def attend_projected(self, query, key_value, attention_mask=None, training=None):
        """`query` `(batch, n, width)` attending to `key_value`, the
        `project_key_value` of some `value`, under `attention_mask`
        (broadcastable to `(batch, n, length)`): equal to
        `self(query, value=value, attention_mask=attention_mask)` without
        projecting `value` again. An encoder-decoder's decoding steps read
        each source's cross-attention keys and values this way."""
        heads = (self._project_queries(query), key_value.keys, key_value.values, None)
        mask = masking.merge_attention_masks(attention_mask)
        return self._attend(heads, None, None, mask, training=training)[0]

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
        score_heads = self.value_heads
        scores_shape = (query.shape[0], score_heads, query.shape[1], key.shape[1])
        return output, keras.KerasTensor(scores_shape, dtype=self.compute_dtype)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "heads": self.heads,
                "head_size": self.head_size,
                "key_size": self.key_size,
                "key_value_heads": self.key_value_heads,
                "output_use_bias": self.output_use_bias,
                "query_key_norm_epsilon": self.query_key_norm_epsilon,
                "query_key_norm_scale_offset": self.query_key_norm_scale_offset,
                "rotary_layout": self.rotary_layout,
                "out_dim": self.out_dim,
                "attention_dropout": self.attention_dropout,
                "attention_scale": self.attention_scale,
                "fused_attention": self.fused_attention,
                "attention_window": self.attention_window,
                "blockwise_attention": self.blockwise_attention,
                "position_encoding": self.position_encoding,
                "rotary_max_wavelength": self.rotary_max_wavelength,
                "rotary_scaling": self.rotary_scaling,
                "rotary_value": self.rotary_value,
                "xpos_scale_base": self.xpos_scale_base,
                "log_n_train_length": self.log_n_train_length,
                "max_relative_position": self.max_relative_position,
                "normalization": self.normalization,
                "attention_logit_soft_cap": self.attention_logit_soft_cap,
                "attention_sinks": self.attention_sinks,
                "attention_sink_tokens": self.attention_sink_tokens,
                **projection_config(self),
            }
        )
        return config


def check_sink_tokens(sink_tokens, attention_window, blockwise_attention):
    """Raises a ValueError naming `attention_sink_tokens` unless it is an
    integer >= 0, and 0 without `attention_window` or with
    `blockwise_attention`."""
    if not isinstance(sink_tokens, int) or isinstance(sink_tokens, bool) or sink_tokens < 0:
        raise ValueError(
            "`attention_sink_tokens` must be an integer >= 0 (the first positions every "
            f"query sees beside its window); received {sink_tokens!r}."
        )
    if sink_tokens and attention_window is None:
        raise ValueError(
            f"`attention_sink_tokens={sink_tokens}` keeps the first positions visible "
            "beside a local window and needs `attention_window`; received "
            "attention_window=None (without a window every position is visible)."
        )
    if sink_tokens and blockwise_attention:
        raise ValueError(
            f"`attention_sink_tokens={sink_tokens}` is for a sliding window, not "
            "XPOS's blockwise attention (`blockwise_attention=True`)."
        )


def _score_scale(attention_scale, key_size):
    """The factor of the scores: `1 / sqrt(key_size)` for True, 1 for
    False, else `attention_scale` itself."""
    if attention_scale is True:
        return 1.0 / math.sqrt(key_size)
    if attention_scale is False:
        return 1.0
    return float(attention_scale)
