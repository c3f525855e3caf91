"""The attention kernel: the one place where attention logits become
probabilities, for the fused, einsum and banded paths alike (see
`DotProductAttention`).
"""

import contextlib
import dataclasses
import math
import threading
from typing import Callable
from typing import Optional

import keras
import numpy as np
from keras import ops

from keras_attn import keras_internals
from keras_attn.layers.masking import relative_positions
# How scores become attention weights (`DotProductAttention.normalization`).
NORMALIZATIONS = ("softmax", "squared_relu", "softmax_plus")

# softmax_plus: the scale is log(n) / log(512) with n at least 16 (Su 2022,
# https://kexue.fm/archives/8823; bert4keras's `attention_normalize`).
SOFTMAX_PLUS_TRAIN_LENGTH = 512
SOFTMAX_PLUS_MIN_KEYS = 16


def _large_negatives():
    import ml_dtypes

    dtypes = {"bfloat16": ml_dtypes.bfloat16, "float16": np.float16,
              "float32": np.float32, "float64": np.float64}
    return {name: float(-0.7 * float(ml_dtypes.finfo(dtype).max)) for name, dtype in dtypes.items()}


# Computed once: `ml_dtypes.finfo` inside a torch.compile'd step is a graph
# break (dynamo cannot compare its dtype objects).
LARGE_NEGATIVES = _large_negatives()


def large_negative(dtype):
    """A finite large negative number in `dtype` (`-0.7 * max`, so adding a
    bounded logit cannot overflow to `-inf`)."""
    return LARGE_NEGATIVES[str(dtype).split(".")[-1]]


def masked_softmax(logits, mask=None, sink_logits=None):
    """Softmax over the last axis, in float32, exactly zero where masked:
    `softmax(where(mask, logits, large_negative)) * mask`, so a fully masked
    row is zeros. With `sink_logits` `s` (`(heads,)`, `logits` as `(batch,
    heads, query_length, key_length)`), each row gets an extra column `s[n]`
    that joins the softmax and is then dropped.
    """
    logits = ops.cast(logits, "float32")
    if mask is not None:
        logits = ops.where(mask, logits, large_negative("float32"))
    if sink_logits is None:
        probabilities = ops.softmax(logits, axis=-1)
    else:
        sinks = ops.reshape(ops.cast(sink_logits, "float32"), (1, -1, 1, 1))
        # The row's largest logit, the sink's included, is subtracted before
        # the exponentials (no overflow); it cancels in the ratio. `amax`:
        # torch's `ops.max` probes its result in a way `torch.compile`
        # cannot trace (a graph break per layer in a compiled step).
        peak = ops.stop_gradient(
            ops.maximum(ops.amax(logits, axis=-1, keepdims=True), sinks)
        )
        exponentials = ops.exp(logits - peak)
        total = ops.sum(exponentials, axis=-1, keepdims=True) + ops.exp(sinks - peak)
        probabilities = exponentials / total
    if mask is None:
        return probabilities
    return probabilities * ops.cast(mask, "float32")


def visible_keys(mask, key_length):
    """How many keys each query row sees, float32, broadcastable to the
    `(batch, heads, query_length, 1)` scores: the count of True in `mask`'s
    last axis, or `key_length` without a mask."""
    if mask is None:
        return ops.reshape(ops.cast(key_length, "float32"), (1, 1, 1, 1))
    return ops.sum(ops.cast(mask, "float32"), axis=-1, keepdims=True)


def masked_squared_relu(logits, mask=None):
    """`relu(logits)^2 / n` over the last axis in float32, exactly zero where
    masked, `n` the number of keys the row sees (`visible_keys`; at least 1,
    so a fully masked row is zero). Hua et al. (2022)'s normalisation."""
    logits = ops.cast(logits, "float32")
    weights = ops.square(ops.relu(logits))
    visible = ops.maximum(visible_keys(mask, ops.shape(logits)[-1]), 1.0)
    if mask is not None:
        weights = ops.where(mask, weights, ops.zeros_like(weights))
    return weights / visible


def soft_cap(logits, cap):
    """`cap * tanh(logits / cap)`, in `logits`' dtype (Gemma 2's soft-capping;
    Bello et al. 2016, https://arxiv.org/abs/1611.09940)."""
    cap = ops.cast(cap, logits.dtype)
    return ops.multiply(ops.tanh(ops.divide(logits, cap)), cap)


def check_soft_cap(argument, value):
    """Raises a ValueError naming `argument` unless `value` is None or a
    positive number."""
    if value is None:
        return
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not 0 < value < math.inf:
        raise ValueError(
            f"`{argument}` must be None or a positive number (the cap of `cap * "
            f"tanh(logits / cap)`); received {value!r}."
        )


_HIGHER_ORDER = threading.local()


@contextlib.contextmanager
def higher_order_gradients():
    """Within the block, attention takes the einsum path, whose gradient can
    itself be differentiated (a gradient penalty; fused kernels have no
    second derivative). Read when the attention is traced or run."""
    depth = getattr(_HIGHER_ORDER, "depth", 0)
    _HIGHER_ORDER.depth = depth + 1
    try:
        yield
    finally:
        _HIGHER_ORDER.depth = depth


def needs_higher_order_gradients():
    """Whether the call is inside `higher_order_gradients()`."""
    return getattr(_HIGHER_ORDER, "depth", 0) > 0


def jax_runs_on_cpu():
    """Whether the backend is JAX and its default device is a CPU."""
    if keras.config.backend() != "jax":
        return False
    import jax

    return jax.default_backend() == "cpu"


def zero_pad_last_axis(x, width):
    """`x` with zeros appended on its last axis up to `width` features."""
    missing = width - x.shape[-1]
    if missing == 0:
        return x
    return keras_internals.zero_pad(x, [(0, 0)] * (len(x.shape) - 1) + [(0, missing)])


@dataclasses.dataclass(frozen=True)
class DotProductAttention:
    """Scaled dot-product attention on `(batch, length, heads, size)` heads.

    For each head `n`, query row `i` and key `j`:

        S[n]_ij = q_i . k_j * scale, or c tanh(q_i . k_j * scale / c)  (float32)
        L[n]_ij = mix_logits(S)[n] + bias[n]_ij
        W[n]_ij = softmax_j(L[n]_ij) over the keys `mask` keeps, 0 elsewhere
        o_i[n] = sum_j dropout(mix_probabilities(W)[n])_ij v[n]_j

    On every path the softmax runs in float32; a query row with every key
    masked gets exactly zero (never NaN) with finite gradients; `n`, the
    keys a row sees under the merged `mask`, is the same in a decoding step
    as in the full pass; with `log_n_train_length` the queries are
    multiplied by `max(1, log(n) / log(log_n_train_length))`.

    `normalization` replaces the softmax (zero where masked):
    `"softmax"`; `"squared_relu"`, `W_ij = relu(L_ij)^2 / n` (Hua et al.
    2022, https://arxiv.org/abs/2202.10447); `"softmax_plus"`,
    `softmax_j(L_ij * log(max(n, 16)) / log(512))` (Su 2022,
    https://kexue.fm/archives/8823), applied to the queries.

    The fused path (`keras.ops.dot_product_attention`, or torch's
    `scaled_dot_product_attention` directly) is taken when `fused` allows
    and nothing needs the einsum: no returned scores, no `logit_soft_cap`,
    inactive dropout, no mixing hooks, a softmax normalisation, no
    `sink_logits`, not float16 on JAX's CPU, and not inside
    `higher_order_gradients()`. Both paths give the same numbers up to
    float reordering.

    Attributes:
        scale: multiplies the scores, usually `1 / sqrt(key_size)`.
        dropout: a `keras.layers.Dropout` applied to the probabilities (after
            `mix_probabilities`), or None.
        fused: None: the fused path where it applies, and for decoupled
            widths where `fuses_decoupled_widths()`; True: also for
            decoupled widths (the narrower heads zero-padded); False: never.
        log_n_train_length: log-n scaling's training length, or None.
        mix_logits: optional `f(logits) -> logits` on float32
            `(batch, heads, query_length, key_length)` scores, applied before
            the bias, the mask and the softmax (talking heads' `P_l`).
        mix_probabilities: optional `f(probabilities) -> probabilities`,
            after the softmax and before dropout (talking heads' `P_w`); its
            output's heads must match the values' heads.
        relative_position: optional `FunctionalRelativePosition` (NEZHA):
            adds `q_i . a_ij` (scaled queries) to the logits and
            `sum_j p_ij a_ij` to the result, `a_ij` its embedding at
            `distance` `i - j`. Einsum path only.
        position_logits: optional `f(query, key, distance) -> logits`
            computed instead of `q_i . k_j` (ReRoPE's
            `keras_attn.layers.rerope.ClippedRotaryLogits`). Einsum path only.
        logit_soft_cap: None, or `c > 0`: the scores become `c tanh(S / c)`
            before `mix_logits`, the bias and the mask (Gemma 2). Einsum path
            only; another value is a ValueError.
        normalization: one of `NORMALIZATIONS`; another value is a
            ValueError, as is `"softmax_plus"` with `log_n_train_length`.
        sink_logits: None, or `(heads,)` sink logits `s[n]` (gpt-oss): an
            extra softmax column, then dropped, so
            `W_ij = exp(L_ij) / (exp(s[n]) + sum_k exp(L_ik))`. Einsum path
            only; a ValueError with `normalization="squared_relu"`.
    """

    scale: float = 1.0
    dropout: Optional[keras.layers.Layer] = None
    fused: Optional[bool] = None
    log_n_train_length: Optional[int] = None
    mix_logits: Optional[Callable] = None
    mix_probabilities: Optional[Callable] = None
    relative_position: Optional[keras.layers.Layer] = None
    position_logits: Optional[Callable] = None
    normalization: str = "softmax"
    logit_soft_cap: Optional[float] = None
    sink_logits: Optional[object] = None

    def __post_init__(self):
        check_soft_cap("logit_soft_cap", self.logit_soft_cap)
        if self.sink_logits is not None and self.normalization == "squared_relu":
            raise ValueError(
                "Attention sinks (`sink_logits`) are an extra column of a softmax; "
                "normalization='squared_relu' has none. Use 'softmax' or 'softmax_plus'."
            )
        if self.normalization not in NORMALIZATIONS:
            raise ValueError(
                f"`normalization` must be one of {NORMALIZATIONS}; received "
                f"{self.normalization!r}."
            )
        if self.normalization == "softmax_plus" and self.log_n_train_length is not None:
            raise ValueError(
                "normalization='softmax_plus' is itself a log-n scaling (train length "
                f"{SOFTMAX_PLUS_TRAIN_LENGTH}); it cannot be combined with "
                f"log_n_train_length={self.log_n_train_length!r}."
            )

    def __call__(
        self, query, key, value, mask=None, bias=None, training=None, return_scores=False,
        distance=None,
    ):
        """Returns `(attended, probabilities)`: `(batch, query_length, heads,
        head_size)` and, when `return_scores`, the probabilities `(batch,
        heads, query_length, key_length)` before dropout (else None).
        `mask` (boolean) and `bias` (additive, finite) broadcast to the
        latter; `distance` is the int `(query_length, key_length)` matrix of
        `i - j` (default: both at `0, 1, ...`).
        """
        if self.log_n_train_length is not None:
            query = ops.multiply(query, self.log_n_factor(mask, ops.shape(key)[1], query.dtype))
        if self.normalization == "softmax_plus":
            factor = self.log_n_factor(
                mask, ops.shape(key)[1], query.dtype, train_length=SOFTMAX_PLUS_TRAIN_LENGTH,
                min_keys=SOFTMAX_PLUS_MIN_KEYS, at_least_one=False,
            )
            query = ops.multiply(query, factor)
        decoupled = query.shape[-1] != value.shape[-1]
        if self.uses_fused_path(query.dtype, training, return_scores, decoupled):
            return self._fused(query, key, value, mask, bias), None
        attended, probabilities = self._einsum(query, key, value, mask, bias, training, distance)
        return attended, probabilities if return_scores else None

    def dropout_is_active(self, training):
        return bool(training) and self.dropout is not None and self.dropout.rate > 0

    def uses_fused_path(self, dtype, training, return_scores, decoupled=False):
        """Whether a call with these arguments takes the fused kernel
        (`decoupled`: the query/key and value widths differ)."""
        if self.fused is False or return_scores or self.dropout_is_active(training):
            return False
        if needs_higher_order_gradients():
            return False
        if decoupled and self.fused is None and not fuses_decoupled_widths():
            return False
        if self.mix_logits is not None or self.mix_probabilities is not None:
            return False
        if self.relative_position is not None or self.normalization == "squared_relu":
            return False
        if self.position_logits is not None or self.logit_soft_cap is not None:
            return False
        if self.sink_logits is not None:
            # A fused kernel cannot add the sink column to its softmax.
            return False
        if keras.backend.standardize_dtype(dtype) == "float16" and jax_runs_on_cpu():
            return False
        return True

    def log_n_factor(self, mask, key_length, dtype, train_length=None, min_keys=1,
                     at_least_one=True):
        """`log(max(n_i, min_keys)) / log(train_length)` per query row, at
        least 1 when `at_least_one`, laid out as `(batch, query_length,
        heads, 1)`; `n_i` counts the keys row i sees. The defaults are
        log-n scaling's (`train_length` `log_n_train_length`);
        softmax_plus passes 512, 16 and no clamp."""
        train_length = train_length or self.log_n_train_length
        visible = visible_keys(mask, key_length)[..., 0]  # (batch, heads, query)
        factor = ops.log(ops.maximum(visible, float(min_keys))) / math.log(train_length)
        if at_least_one:
            factor = ops.maximum(factor, 1.0)
        return ops.cast(ops.transpose(factor, (0, 2, 1))[..., None], dtype)

    def _fused(self, query, key, value, mask, bias):
        return zero_rows_without_keys(fused_attention(query, key, value, mask, bias, self.scale), mask)

    def _einsum(self, query, key, value, mask, bias, training, distance=None):
        query = ops.multiply(query, ops.cast(self.scale, query.dtype))
        relative = self.relative_position
        if distance is None and (relative is not None or self.position_logits is not None):
            distance = relative_positions(ops.shape(query)[1], ops.shape(key)[1])
        if self.position_logits is not None:
            logits = self.position_logits(query, key, distance)
        else:
            logits = ops.cast(ops.einsum("btnh,bsnh->bnts", query, key), "float32")
        if relative is not None:
            logits = logits + relative.key_logits(query, distance)
        if self.logit_soft_cap is not None:
            logits = soft_cap(logits, self.logit_soft_cap)
        if self.mix_logits is not None:
            logits = self.mix_logits(logits)
        if bias is not None:
            logits = logits + ops.cast(bias, "float32")
        if self.normalization == "squared_relu":
            probabilities = masked_squared_relu(logits, mask)
        else:
            probabilities = masked_softmax(logits, mask, self.sink_logits)
        if self.mix_probabilities is not None:
            probabilities = self.mix_probabilities(probabilities)
        probabilities = ops.cast(probabilities, value.dtype)
        dropped = probabilities
        if self.dropout is not None:
            dropped = self.dropout(probabilities, training=training)
        attended = ops.einsum("bnts,bsnh->btnh", dropped, value)
        if relative is not None:
            attended = attended + relative.value_term(
                dropped, distance, value.shape[-1], attended.dtype
            )
        return attended, probabilities


def fuses_decoupled_widths():
    """Whether the fused kernel is the default on this backend for heads
    whose query/key width differs from their value width (docs/speed.md,
    "Fused attention for decoupled widths")."""
    return keras.config.backend() == "torch"


def fused_attention(query, key, value, mask, bias, scale):
    """The backend's fused kernel on `(batch, length, heads, size)` heads,
    with `mask` and `bias` as `DotProductAttention` takes them. The narrower
    of the query/key and value heads is zero-padded on its last axis (no dot
    product changes; the scale is passed explicitly) and the result sliced
    back. Rows without a visible key are left to `zero_rows_without_keys`.
    """
    head_size = value.shape[-1]
    width = max(query.shape[-1], head_size)
    query, key, value = (zero_pad_last_axis(t, width) for t in (query, key, value))
    if keras.config.backend() == "torch":
        return torch_scaled_dot_product(query, key, value, mask, bias, scale)[..., :head_size]
    dtype = keras.backend.standardize_dtype(query.dtype)
    if bias is None:
        attended = ops.dot_product_attention(query, key, value, mask=mask, scale=scale)
    else:
        bias = ops.cast(bias, dtype)
        while len(bias.shape) < 4:
            bias = bias[None, ...]
        if mask is not None:
            bias = ops.where(mask, bias, ops.cast(large_negative(dtype), dtype))
        attended = ops.dot_product_attention(query, key, value, bias=bias, scale=scale)
    return attended[..., :head_size]


def zero_rows_without_keys(attended, mask):
    """`attended` `(batch, query_length, heads, size)` with zeros in the
    rows whose keys `mask` hides all (fused kernels give them a uniform
    average), as a product with the 0/1 row indicator."""
    if mask is None:
        return attended
    rows_with_any_key = ops.transpose(ops.any(mask, axis=-1), (0, 2, 1))[..., None]
    return attended * ops.cast(rows_with_any_key, attended.dtype)


def torch_scaled_dot_product(query, key, value, mask, bias, scale):
    """`torch.nn.functional.scaled_dot_product_attention` on
    `(batch, length, heads, size)` heads, called directly: the heads go in
    as transposed views (no copy of a decoding cache) and nothing breaks a
    `torch.compile` graph. The mask and bias are folded into one finite
    additive mask; rows without a visible key are zeroed by the caller.
    """
    import torch

    query, key, value = (ops.convert_to_tensor(t) for t in (query, key, value))
    dtype = query.dtype
    additive = None
    if bias is not None:
        additive = ops.convert_to_tensor(bias).to(dtype)
        while additive.dim() < 4:
            additive = additive[None]
    if mask is not None:
        # The large negative as a Python number (torch rounds it to the
        # tensor's dtype, as `torch.tensor` would): no host-to-device copy
        # per layer on a GPU.
        negative = large_negative(keras.backend.standardize_dtype(dtype))
        kept = query.new_zeros(()) if additive is None else additive
        additive = torch.where(ops.convert_to_tensor(mask, "bool"), kept, negative)
    attended = torch.nn.functional.scaled_dot_product_attention(
        query.transpose(1, 2), key.transpose(1, 2), value.transpose(1, 2),
        attn_mask=additive, scale=scale,
    )
    return attended.transpose(1, 2)
