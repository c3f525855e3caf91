"""Talking-heads attention: learned mixing across heads around the softmax."""

import dataclasses

import keras
from keras import ops

from keras_attn.layers.key_value_cache import KeyValueCache
from keras_attn.layers.multi_head_attention import MultiHeadAttention
from keras_attn.layers.multi_head_attention import check_positive_integer


@keras.saving.register_keras_serializable(package="keras_attn")
class TalkingHeadsAttention(MultiHeadAttention):
    """Talking-heads attention (Shazeer et al., 2020).

    Multi-head attention in which the heads exchange information right before
    and right after the softmax. With `h_k` query/key heads, `h` softmax heads
    and `h_v` value heads:

        J[n]_ij = q[n]_i . k[n]_j / sqrt(key_size)          n < h_k
        L[m]_ij = sum_n J[n]_ij P_l[n, m] + bias[m]_ij      m < h   (masked)
        W[m]_ij = softmax_j(L[m]_ij)
        U[v]_ij = sum_m W[m]_ij P_w[m, v]                   v < h_v
        o_i[v] = sum_j dropout(U[v])_ij v[v]_j

    `P_l` (`h_k x h`) mixes the logits, `P_w` (`h x h_v`) mixes the weights.
    Masks and `attention_bias` are applied after the first mixing (they act on
    the `h` softmax heads); dropout after the second.
    With the default identity initialisation (and square head counts) a freshly
    built layer computes exactly plain multi-head attention.

    Reference: Noam Shazeer, Zhenzhong Lan, Youlong Cheng, Nan Ding, Le Hou,
    "Talking-Heads Attention", 2020, https://arxiv.org/abs/2003.02436.

    The layer is `keras_attn.MultiHeadAttention` with `P_l` and `P_w` passed
    to its attention kernel as the hooks that mix scores across heads before
    and after the softmax; masking, the float32 softmax, zero rows for fully
    masked queries, dropout, windows (`attention_window`) and position
    encodings are the kernel's and the base layer's. The head mixing needs
    the full score tensor, so this layer always takes the einsum path:
    `fused_attention=True` raises a ValueError.

    Args:
        heads: number of softmax heads `h`.
        head_size: per-head width of the value projection.
        key_size: per-head width of the query and key projections; defaults to
            `head_size`.
        key_heads: number of query/key heads `h_k`; defaults to `heads`.
        value_heads: number of value heads `h_v`; defaults to `heads`.
        talking_heads_initializer: initializer of both mixing matrices.
            `"identity"` (default) makes a fresh layer equal to multi-head
            attention; any Keras initializer is accepted.
        fused_attention: must be False (the default); kept so that the
            config has every `MultiHeadAttention` argument.
        **kwargs: every other `keras_attn.MultiHeadAttention` argument
            (`out_dim`, `use_bias`, `attention_dropout`, `attention_scale`,
            initializers, `name`, `dtype`).

    Call arguments: as `keras_attn.MultiHeadAttention`. With
    `return_attention_scores=True` the returned scores are the mixed weights
    `U`, `(batch, value_heads, query_length, key_length)`, before dropout.

    Example:

    >>> layer = keras_attn.TalkingHeadsAttention(heads=8, head_size=4, key_heads=4)
    >>> x = np.random.rand(2, 10, 32).astype("float32")
    >>> layer(x, use_causal_mask=True).shape
    (2, 10, 32)
    """

    checkpoint_free_weights = ("pre_softmax_kernel", "post_softmax_kernel")

    def __init__(
        self,
        heads,
        head_size,
        key_size=None,
        key_heads=None,
        value_heads=None,
        talking_heads_initializer="identity",
        fused_attention=False,
        **kwargs,
    ):
        if fused_attention:
            raise ValueError(
                "TalkingHeadsAttention always takes the einsum path: the fused "
                "attention kernels cannot mix scores across heads; received "
                "fused_attention=True (leave it out, or pass False)."
            )
        key_value_heads = kwargs.get("key_value_heads")
        if key_value_heads not in (None, heads):
            raise ValueError(
                "TalkingHeadsAttention sets its key and value heads with `key_heads` "
                "and `value_heads` (the mixing matrices' sizes), not grouped-query "
                f"attention's `key_value_heads`; received key_value_heads={key_value_heads!r} "
                f"with heads={heads}."
            )
        super().__init__(
            heads, head_size, key_size=key_size, fused_attention=False, **kwargs
        )
        check_positive_integer("key_heads", key_heads, optional=True)
        check_positive_integer("value_heads", value_heads, optional=True)
        self._key_heads = key_heads or heads
        self._value_heads = value_heads or heads
        self.talking_heads_initializer = keras.initializers.get(
            talking_heads_initializer
        )

        self._kernel = dataclasses.replace(
            self._kernel,
            mix_logits=self._mix_logits,
            mix_probabilities=self._mix_probabilities,
        )

    @property
    def key_heads(self):
        return self._key_heads

    @property
    def value_heads(self):
        return self._value_heads

    def build(self, query_shape, value_shape=None, key_shape=None):
        self._build_projections(
            query_shape, value_shape, key_shape, self.key_heads, self.key_heads,
            self.value_heads,
        )
        self.pre_softmax_kernel = self.add_weight(
            name="pre_softmax_kernel",
            shape=(self.key_heads, self.heads),
            initializer=self.talking_heads_initializer,
        )
        self.post_softmax_kernel = self.add_weight(
            name="post_softmax_kernel",
            shape=(self.heads, self.value_heads),
            initializer=self.talking_heads_initializer,
        )

    def empty_cache(self, batch, capacity):
        return KeyValueCache.empty(
            batch, capacity, self.key_heads, self.key_size, self.value_heads,
            self.head_size, self.compute_dtype,
        )

    def _mix_logits(self, logits):
        kernel = ops.cast(self.pre_softmax_kernel, "float32")
        return ops.einsum("bnts,nm->bmts", logits, kernel)

    def _mix_probabilities(self, probabilities):
        kernel = ops.cast(self.post_softmax_kernel, "float32")
        return ops.einsum("bmts,mv->bvts", probabilities, kernel)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "key_heads": self.key_heads,
                "value_heads": self.value_heads,
                "talking_heads_initializer": keras.initializers.serialize(
                    self.talking_heads_initializer
                ),
            }
        )
        return config
