"""A builder model's forward pass, a chunk of tokens at a time, with caches."""

from typing import NamedTuple

from keras import ops

from keras_attn.layers import masking
from keras_attn.layers.direct_call import direct_call
from keras_attn.layers.key_value_cache import CacheStep
from keras_attn.layers.key_value_cache import KeyValueCache

GENERATIVE_APPLICATIONS = ("lm", "unilm")


class DecodingCache(NamedTuple):
    """Everything a decoding step reads about the tokens before it.

    Attributes:
        layers: one `KeyValueCache` per attention layer.
        key_positions: int32 `(capacity,)`, the position each slot holds
            (-1 while empty); the same for every row.
        key_valid: boolean `(batch, capacity)`, slots holding a real token
            (the full pass masks padding tokens as keys; so does the cache).
        real_tokens: int32 `(batch,)`, how many real tokens each row has
            written (RoBERTa numbers positions over real tokens only).
    """

    layers: tuple
    key_positions: object
    key_valid: object
    real_tokens: object

    def select_rows(self, rows):
        """The cache of the rows `rows` (int `(new_batch,)`), in that order;
        beam search uses it to follow the beams it keeps."""
        return DecodingCache(
            tuple(
                KeyValueCache(ops.take(c.keys, rows, axis=0), ops.take(c.values, rows, axis=0))
                for c in self.layers
            ),
            self.key_positions,
            ops.take(self.key_valid, rows, axis=0),
            ops.take(self.real_tokens, rows, axis=0),
        )


class Block(NamedTuple):
    attention: object
    attention_add: object
    attention_norm: object
    feed_forward: object
    feed_forward_add: object
    feed_forward_norm: object


class CachedForward:
    """The forward pass of a builder model with `application="lm"` or
    `"unilm"`, run on a chunk of new tokens against per-layer key/value
    caches.

    It calls the model's own layers, found by their stable names (see
    `keras_attn.Transformer`), in the template's order: embeddings (token,
    segment, position at the tokens' absolute positions), the attention
    blocks (each `MultiHeadAttention` called with its `KeyValueCache`;
    ALBERT's shared block once per layer, each time with its own cache), and
    the masked-LM head. The mask of a chunk is built from the slots'
    positions by `masking.merge_attention_masks`, the one mask merger, and a
    position bias (ALiBi, KERPLE, Sandwich) by `bias(i - j)` of the model's
    `Position-Bias` layer, so every step computes what the full pass
    computes for the same prefix: causality, the `attention_window` band
    (causal for `"lm"`, symmetric for `"unilm"`, blockwise for XPOS), padding
    tokens masked as keys, log-n scaling over the keys a query sees.

    Dropout layers are skipped: decoding is inference. On torch, layers are
    run by their `call` where that is exact (`direct_call`): an eager step
    would otherwise pay Keras' per-call overhead some 150 times.

    Args:
        model: a `keras_attn.TransformerModel` built by
            `build_transformer_model` with `application="lm"` or `"unilm"`.

    Raises:
        ValueError: a model of another application, a T-TA model, or one
            whose layers are not the template's.
    """

    def __init__(self, model):
        application = getattr(model, "application", None)
        if application not in GENERATIVE_APPLICATIONS:
            raise ValueError(
                "Generation needs a model built with application='lm' or 'unilm' "
                f"(a language-model head under a causal or seq2seq mask); this model "
                f"({model.name}) has application={application!r}."
            )
        self.model = model
        self.application = application
        self.causal = application == "lm"
        find = _layer_finder(model)
        mask_layer = find("Attention-Mask")
        if mask_layer.mask_diagonal:
            raise ValueError(
                f"{model.name} masks each token from itself (T-TA); it predicts every "
                "token in one pass and cannot generate left to right."
            )
        self.pad_token_id = mask_layer.pad_token_id
        # `conditional_layer_norm` models: every norm takes the `condition`
        # input, `(batch, width)`, fed to each step.
        self.conditional = "condition" in model.input
        self.masks_pad_tokens = "padding_mask" not in model.input
        self.token_embedding = find("Embedding-Token")
        self.segment_embedding = find("Embedding-Segment", optional=True)
        self.position_embedding = find("Embedding-Position", optional=True)
        self.embedding_add = find("Embedding-Add", optional=True)
        self.embedding_norm = find("Embedding-Norm")
        self.embedding_mapping = find("Embedding-Mapping", optional=True)
        self.position_bias = find("Position-Bias", optional=True)
        self.blocks = []
        while find(f"Transformer-{len(self.blocks)}-MultiHeadSelfAttention", optional=True):
            self.blocks.append(_block(find, f"Transformer-{len(self.blocks)}"))
        shared = find("Transformer-MultiHeadSelfAttention", optional=True)
        if not self.blocks and shared is not None:
            # ALBERT's one block, applied once per layer: once per call in the
            # model's graph, each call with its own cache.
            self.blocks = [_block(find, "Transformer")] * len(shared._inbound_nodes)
        if not self.blocks:
            raise ValueError(f"{model.name} has no layer `Transformer-0-MultiHeadSelfAttention`.")
        self.mlm_dense = find("MLM-Dense")
        self.mlm_norm = find("MLM-Norm")
        self.mlm_decoder = find("MLM-Decoder", optional=True)
        self.mlm_bias = find("MLM-Bias")
        attention = self.blocks[0].attention
        self.attention_window = attention.attention_window
        self.blockwise = attention.blockwise_attention
        self.vocab_size = self.token_embedding.input_dim
        max_length = getattr(self.position_embedding, "max_length", None)
        self.max_length = max_length

    # Sizes ---------------------------------------------------------------

    def keys_needed(self):
        """How many of the latest positions a query can see: the cache a
        window needs (None without a window)."""
        window = self.attention_window
        if window is None:
            return None
        if self.blockwise:
            return 2 * window
        if self.causal:
            return window
        return window // 2 + 1

    def capacity(self, prompt_length, max_length):
        """Slots per layer for prompts padded to `prompt_length` and
        sequences of `max_length`: every position without a window; with
        one, the window's keys (a ring), or the prompt if it is longer (the
        prompt is encoded in one pass)."""
        needed = self.keys_needed()
        if needed is None:
            return max_length
        return min(max_length, max(prompt_length, needed))

    def empty_cache(self, batch, capacity):
        dtype = self.blocks[0].attention.compute_dtype
        layers = []
        for block in self.blocks:
            attention = block.attention
            layers.append(
                KeyValueCache.empty(
                    batch,
                    capacity,
                    attention.query_dense.units // attention.key_size,
                    attention.key_size,
                    attention.value_dense.units // attention.head_size,
                    attention.head_size,
                    dtype,
                )
            )
        return DecodingCache(
            tuple(layers),
            ops.full((capacity,), -1, "int32"),
            ops.zeros((batch, capacity), "bool"),
            ops.zeros((batch,), "int32"),
        )

    # The step --------------------------------------------------------------

    def __call__(self, token_ids, position, cache, segment_ids=None, padding_mask=None,
                 write_rows=None, causal=True, logits=True, condition=None):
        """Runs `token_ids` `(batch, n)`, at positions `position ..
        position + n - 1`, against `cache`.

        Args:
            token_ids: int `(batch, n)`.
            position: int scalar, the position of the first token; its slot
                is `position % capacity` (a chunk never wraps around).
            cache: a `DecodingCache`.
            segment_ids: int `(batch, n)` when the model has token types.
            padding_mask: optional boolean `(batch, n)`, False for padding
                (prompts padded to one length). A pad id is padding too, as
                in the full pass, unless the model was built with
                `padding_mask_input`.
            write_rows: optional boolean `(batch,)`: rows whose caches this
                step writes (see `CacheStep`).
            causal: whether the chunk's tokens see each other causally;
                False only for a UniLM source encoded in one pass.
            logits: whether to compute the masked-LM logits.
            condition: float `(batch, width)`, the `condition` input of a
                model built with `conditional_layer_norm` (required there).

        Returns:
            `(logits, cache)`: float `(batch, n, vocab)` logits (None when
            `logits` is False) and the updated cache.
        """
        if self.conditional != (condition is not None):
            raise ValueError(
                f"{self.model.name} "
                + ("takes a `condition` (it was built with conditional_layer_norm=...); "
                   "give one per row." if self.conditional else "takes no `condition`.")
            )
        length = token_ids.shape[1]
        capacity = cache.key_positions.shape[0]
        positions = ops.cast(position, "int32") + ops.arange(length, dtype="int32")
        slot = ops.mod(ops.cast(position, "int32"), capacity)
        key_positions = ops.slice_update(cache.key_positions, (slot,), positions)
        if self.masks_pad_tokens:
            real = ops.not_equal(token_ids, self.pad_token_id)
        else:
            real = ops.ones_like(token_ids, "bool")
        if padding_mask is not None:
            real = ops.logical_and(real, ops.cast(padding_mask, "bool"))
        written = real
        if write_rows is not None:
            old = ops.slice(cache.key_valid, (0, slot), ops.shape(real))
            written = ops.where(write_rows[:, None], real, old)
        key_valid = ops.slice_update(cache.key_valid, (0, slot), written)
        counted = ops.cast(real, "int32")
        token_positions = positions
        if getattr(self.position_embedding, "count_from_padding", False):
            numbered = cache.real_tokens[:, None] + ops.cumsum(counted, axis=1) - 1
            token_positions = ops.where(real, numbered, -1)
        if write_rows is not None:
            counted = counted * ops.cast(write_rows, "int32")[:, None]
        real_tokens = cache.real_tokens + ops.sum(counted, axis=1)
        step = CacheStep(slot, positions, key_positions, write_rows)

        hidden = self.embed(token_ids, segment_ids, token_positions, condition)
        mask = self.mask(positions, key_positions, key_valid, causal)
        bias = None
        if self.position_bias is not None:
            distance = masking.relative_positions(length, capacity, positions, key_positions)
            bias = ops.cast(self.position_bias.bias(distance), "float32")[None]
        layers = []
        for block, layer_cache in zip(self.blocks, cache.layers):
            attended, layer_cache = direct_call(
                block.attention, hidden, attention_mask=mask, attention_bias=bias,
                cache=layer_cache, cache_step=step,
            )
            layers.append(layer_cache)
            hidden = self.norm(
                block.attention_norm, direct_call(block.attention_add, [hidden, attended]), condition
            )
            feed_forward = block.feed_forward
            transformed = direct_call(
                feed_forward.output_dense, direct_call(feed_forward.intermediate_dense, hidden)
            )
            hidden = self.norm(
                block.feed_forward_norm,
                direct_call(block.feed_forward_add, [hidden, transformed]),
                condition,
            )
        cache = DecodingCache(tuple(layers), key_positions, key_valid, real_tokens)
        return (self.head(hidden, condition) if logits else None), cache

    def norm(self, layer, hidden, condition):
        """A LayerNorm of the model, conditioned when the model is."""
        if condition is None:
            return direct_call(layer, hidden)
        return direct_call(layer, hidden, condition=condition)

    def embed(self, token_ids, segment_ids, positions, condition=None):
        """The template's `embed` at the given positions."""
        embedded = [direct_call(self.token_embedding, token_ids)]
        if self.segment_embedding is not None:
            if segment_ids is None or self.segment_embedding.input_dim == 1:
                segment_ids = ops.zeros_like(token_ids)
            embedded.append(direct_call(self.segment_embedding, segment_ids))
        if self.position_embedding is not None:
            embedded.append(direct_call(self.position_embedding, token_ids, positions=positions))
        hidden = embedded[0] if len(embedded) == 1 else direct_call(self.embedding_add, embedded)
        hidden = self.norm(self.embedding_norm, hidden, condition)
        if self.embedding_mapping is not None:
            hidden = direct_call(self.embedding_mapping, hidden)
        return hidden

    def mask(self, positions, key_positions, key_valid, causal):
        """`(batch, 1, n, capacity)`: the slots each new query sees."""
        visible = ops.logical_and(key_valid, ops.greater_equal(key_positions, 0)[None])
        visible = visible[:, None, :]
        length, capacity = positions.shape[0], key_positions.shape[0]
        if causal and not self.causal:
            # A UniLM target token sees the source and the target before it.
            visible = ops.logical_and(
                visible,
                masking.causal_mask(length, capacity, positions, key_positions)[0],
            )
        return masking.merge_attention_masks(
            attention_mask=visible,
            use_causal_mask=self.causal,
            query_length=length,
            key_length=capacity,
            attention_window=self.attention_window,
            blockwise=self.blockwise,
            query_positions=positions,
            key_positions=key_positions,
        )

    def head(self, hidden, condition=None):
        transformed = self.norm(self.mlm_norm, direct_call(self.mlm_dense, hidden), condition)
        if self.mlm_decoder is None:
            logits = direct_call(self.token_embedding, transformed, reverse=True)
        else:
            logits = direct_call(self.mlm_decoder, transformed)
        return direct_call(self.mlm_bias, logits)


def _block(find, prefix):
    """The layers of the block whose names start with `prefix`."""
    attention = f"{prefix}-MultiHeadSelfAttention"
    feed_forward = f"{prefix}-FeedForward"
    return Block(
        find(attention), find(f"{attention}-Add"), find(f"{attention}-Norm"),
        find(feed_forward), find(f"{feed_forward}-Add"), find(f"{feed_forward}-Norm"),
    )


def _layer_finder(model):
    names = {layer.name: layer for layer in model.layers}

    def find(name, optional=False):
        if name in names:
            return names[name]
        if optional:
            return None
        raise ValueError(
            f"Generation walks the layers of a model built by build_transformer_model; "
            f"{model.name} has no layer named {name!r}."
        )

    return find
