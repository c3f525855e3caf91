"""A builder model's forward pass, a chunk of tokens at a time, with caches."""

from typing import NamedTuple

from keras import ops

from keras_attn.layers import masking
from keras_attn.layers.key_value_cache import CacheStep
from keras_attn.layers.key_value_cache import KeyValueCache
from keras_attn.layers.key_value_cache import update_slots
from keras_attn.layers.key_value_cache import write_slots
from keras_attn.layers.positions import shared_tables
from keras_attn.layers.rope_scaling import LENGTH_DEPENDENT
from keras_attn.layers.rope_scaling import recompute_length
from keras_attn.models.passes import DecodeStep

GENERATIVE_APPLICATIONS = ("lm", "unilm", "seq2seq")


class EncodedSource(NamedTuple):
    """What an encoder-decoder's decoding steps read of the source: one
    per row, computed once (see `CachedForward.encode_source`).

    Attributes:
        keys_values: one `KeyValueCache` per decoder block, its
            cross-attention's keys and values of the encoder's output.
        valid: boolean `(batch, source_length)`, the source's real tokens.
    """

    keys_values: tuple
    valid: object

    def select_rows(self, rows):
        """The sources of the rows `rows` (beams)."""
        return EncodedSource(
            tuple(
                KeyValueCache(ops.take(c.keys, rows, axis=0), ops.take(c.values, rows, axis=0))
                for c in self.keys_values
            ),
            ops.take(self.valid, rows, axis=0),
        )

class DecodingCache(NamedTuple):
    """Everything a decoding step reads about the tokens before it.

    Attributes:
        layers: one `KeyValueCache` per block.
        key_positions: int32 `(capacity,)`, the position each slot holds
            (-1 while empty); the same for every row.
        key_valid: boolean `(batch, capacity)`, slots holding a real token
            (the full pass masks padding tokens as keys; so does the cache).
        key_orders: int32 `(batch, capacity)`, UniLM's order of each slot
            (the cumulative sum of the segment ids, see
            `masking.sequence_mask`); zeros for a causal LM.
        real_tokens: int32 `(batch,)`, how many real tokens each row has
            written (RoBERTa numbers positions over real tokens only).
        segment_sums: int32 `(batch,)`, the sum of the segment ids each row
            has written (the order of its next token).
    """

    layers: tuple
    key_positions: object
    key_valid: object
    key_orders: object
    real_tokens: object
    segment_sums: object

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
            ops.take(self.key_orders, rows, axis=0),
            ops.take(self.real_tokens, rows, axis=0),
            ops.take(self.segment_sums, rows, axis=0),
        )


class CachedForward:
    """The forward pass of a builder model with `application="lm"` or
    `"unilm"`, run on a chunk of new tokens against per-block key/value
    caches.

    It runs the model's own template (`model.template`): `embed` at the
    tokens' absolute positions, each `TransformerBlock` with its
    `KeyValueCache`, and `language_model_head`, the code of the full pass.
    A step adds only bookkeeping: the positions each slot holds, real tokens,
    UniLM's order, RoBERTa's count of real tokens. The mask is
    `masking.sequence_mask` then causality and window at the slots'
    positions (`masking.merge_attention_masks`). Under a shared window the
    cache is a ring (`slot`), with `attention_sink_tokens=k` slots before it.

    Args:
        model: a `keras_attn.TransformerModel` built by
            `build_transformer_model` with `application="lm"` or `"unilm"`.

    Raises:
        ValueError: a model of another application, a T-TA model, a model
            without its template, a variant overriding a hook that only the
            full pass runs (named in the message), or sink tokens with a
            position bias by distance.
        TypeError: a variant whose `embed`, `finish_blocks` or
            `language_model_head` takes no `step`.
    """

    def __init__(self, model):
        application = getattr(model, "application", None)
        if application not in GENERATIVE_APPLICATIONS:
            raise ValueError(
                "Generation needs a model built with application='lm' or 'unilm' "
                "(a language-model head under a causal or seq2seq mask), or an "
                f"encoder-decoder (T5); this model ({model.name}) has "
                f"application={application!r}."
            )
        template = getattr(model, "template", None)
        if template is None:
            raise ValueError(
                f"{model.name} does not record the variant that built it (it was not "
                "built by build_transformer_model, or was saved before keras_attn "
                "recorded it): build it again with build_transformer_model(..., "
                f"application={application!r}) and load its weights with load_weights."
            )
        plan = template.decoding_plan()
        if plan.refusal is not None:
            raise ValueError(f"{model.name}: {plan.refusal}")
        missing = template.hooks_without_step
        if missing:
            name, older = next(iter(missing.items()))
            raise TypeError(
                f"{type(template).__name__}.{name} takes no `step`{older}: a decoding step "
                f"calls `{name}(..., step=step)` with a `DecodeStep` (`FULL_PASS` in the full "
                "pass, keras_attn.models.passes), and the hook runs its layers by `step.run`. "
                "Add the argument."
            )
        self.model = model
        self.plan = plan
        self.application = application
        self.causal = plan.causal
        self.unilm = plan.unilm
        self.seq2seq = plan.seq2seq
        # What fills the buffer after a prompt and a finished row: the pad
        # id, or 0 for a vocabulary without one (GPT-2), whose padding the
        # prompts' lengths say.
        pad_token_id = plan.pad_token_id
        self.pad_token_id = 0 if pad_token_id is None else pad_token_id
        # An encoder-decoder's first decoder input: the config's, else the
        # pad id (T5's).
        start = plan.start_token_id
        self.start_token_id = self.pad_token_id if start is None else start
        # `conditional_layer_norm` models: every norm takes the `condition`
        # input, `(batch, width)`, fed to each step.
        self.conditional = plan.conditional
        # A decoder's pad id (T5's, its start token) is never padding.
        self.masks_pad_tokens = not (
            plan.padding_mask_input or pad_token_id is None or self.seq2seq
        )
        self.blocks = plan.blocks
        self.position_bias = plan.position_bias
        position = plan.position_table
        self.count_from_padding = getattr(position, "count_from_padding", False)
        self.max_length = getattr(position, "max_length", None)
        self.vocab_size = plan.vocab_size
        # A rope scaling that reads the length being encoded (`dynamic`):
        # padding the prompts would change what their keys encode, so the
        # prompts are not padded to a bucket (`prompts.prompt_bucket`).
        scaling = plan.rope_scaling
        self.length_dependent = scaling is not None and scaling["rope_type"] in LENGTH_DEPENDENT
        # LongRoPE encodes every position anew once the length exceeds its
        # `L`: the decoding step at position `L` encodes the whole sequence
        # again (`generator.recomputing_step`); None for every other model.
        self.recompute_length = recompute_length(scaling)
        attention = self.blocks[0].attention
        # Each block's window. One capacity serves every layer: a window
        # shared by all of them makes the cache a ring of the keys it needs;
        # windows that differ by layer (the config's `layer_types`) keep
        # every position, and each layer's mask keeps its own band.
        self.windows = tuple(block.attention.attention_window for block in self.blocks)
        self.attention_window = self.windows[0] if len(set(self.windows)) == 1 else None
        self.blockwise = attention.blockwise_attention
        # StreamingLLM's sink tokens (`attention_sink_tokens`), per block:
        # the first positions its window keeps visible. Under one shared
        # window the cache keeps them in slots of their own, `sink_slots`,
        # before the ring; without it every position is kept anyway.
        self.sink_tokens = tuple(
            getattr(block.attention, "attention_sink_tokens", 0) for block in self.blocks
        )
        self.sink_slots = max(self.sink_tokens) if self.attention_window is not None else 0
        # Whether one row can hold several sequences (`query_owners`): not
        # when anything compares positions across the row or reads a row's
        # own state (distance biases, NEZHA's and XPOS's relative positions,
        # windows and sinks, UniLM orders, a source per row, RoBERTa's count
        # of real tokens, a length per row).
        self.packs_sequences = not (
            self.unilm or self.seq2seq or self.length_dependent
            or self.position_bias is not None or self.count_from_padding
            or any(window is not None for window in self.windows)
            or any(self.sink_tokens)
            or any(getattr(block.attention.position, "compares_positions", False)
                   for block in self.blocks)
        )
        if self.sink_slots and self.position_bias is not None:
            raise ValueError(
                f"{model.name}: cached decoding with attention_sink_tokens="
                f"{self.sink_slots} and a position bias by distance "
                f"({type(self.position_bias).__name__}) is not supported: the bias table "
                "of a step spans the cache's capacity, and the sink tokens lie farther. "
                "Use a rotary or absolute-position variant, or no sink tokens."
            )

    # Sizes ---------------------------------------------------------------

    def keys_needed(self):
        """How many slots a query's keys need: the latest positions its
        window can see, plus the sink tokens (`sink_slots`) kept beside
        them (None without a window)."""
        window = self.attention_window
        if window is None:
            return None
        if self.blockwise:
            return 2 * window
        if self.causal:
            return window + self.sink_slots
        return window // 2 + 1 + self.sink_slots

    def capacity(self, prompt_length, max_length):
        """Slots per layer for prompts padded to `prompt_length` and sequences of
        `max_length`: every position without a window; with one, the window's
        keys, or the prompt if longer, or LongRoPE's `L + 1` positions if more."""
        needed = self.keys_needed()
        if needed is None:
            return max_length
        if self.recompute_length is not None:
            # The sequence encoded again in one chunk at `recompute_length`.
            needed = max(needed, self.recompute_length + 1)
        # At least one ring slot beside the sink tokens' (a short sequence
        # leaves it unused).
        return max(min(max_length, max(prompt_length, needed)), self.sink_slots + 1)

    def slot(self, position, capacity):
        """The cache slot of `position` (int32 scalar) in `capacity` slots:
        `position % capacity`, or with `sink_slots` `k`, `position` below `k` and
        `k + (position - k) % (capacity - k)` above.

        Raises:
            ValueError: `capacity <= sink_slots` (no room for a ring).
        """
        sinks = self.sink_slots
        if not sinks:
            return ops.mod(position, capacity)
        if capacity <= sinks:
            raise ValueError(
                f"{self.model.name}: a cache of {capacity} slots cannot hold the "
                f"{sinks} sink tokens (attention_sink_tokens={sinks}) and a ring for the "
                f"window; use a capacity above {sinks} (`capacity(...)` gives "
                f"{sinks} + the window)."
            )
        ring = sinks + ops.mod(position - sinks, capacity - sinks)
        return ops.where(ops.less(position, sinks), position, ring)

    def empty_cache(self, batch, capacity):
        # Each attention's own shape: grouped-query attention stores only its
        # key/value heads.
        return DecodingCache(
            tuple(block.attention.empty_cache(batch, capacity) for block in self.blocks),
            ops.full((capacity,), -1, "int32"),
            ops.zeros((batch, capacity), "bool"),
            ops.zeros((batch, capacity), "int32"),
            ops.zeros((batch,), "int32"),
            ops.zeros((batch,), "int32"),
        )

    def encode_source(self, token_ids, padding_mask):
        """An encoder-decoder's `EncodedSource` of the sources `token_ids`
        `(batch, source_length)` (real where `padding_mask`): the template's
        encoder, run once, and each decoder block's cross-attention keys
        and values of its output."""
        encoded, valid = self.plan.encode(token_ids, padding_mask)
        return EncodedSource(
            tuple(block.cross_attention.project_key_value(encoded) for block in self.blocks),
            valid,
        )

    # The step --------------------------------------------------------------

    def __call__(self, token_ids, position, cache, segment_ids=None, padding_mask=None,
                 write_rows=None, logits=True, condition=None, source=None,
                 row_positions=None, key_row_positions=None, rotary_lengths=None,
                 logits_at=None, query_owners=None, key_owners=None, packing=None):
        """Runs `token_ids` `(batch, n)`, at positions `position .. position + n -
        1`, against `cache`.

        Args:
            token_ids: int `(batch, n)`.
            position: int scalar, the first token's position (a chunk never
                wraps around the ring).
            cache: a `DecodingCache`.
            segment_ids: int `(batch, n)`, the token types (for `"unilm"`, 0 for
                the source, 1 for generated tokens); zeros when None.
            padding_mask: optional boolean `(batch, n)`, False for padding; a pad
                id is padding too unless the model has `padding_mask_input`.
            write_rows: optional boolean `(batch,)`: rows whose caches this step
                writes (see `CacheStep`).
            logits: whether to compute the masked-LM logits.
            condition: float `(batch, width)`, required for a
                `conditional_layer_norm` model.
            source: an encoder-decoder's `EncodedSource` (required there).
            row_positions: optional int `(batch, n)`: each row's own positions
                (`CacheStep.row_positions`); `position` is then a shared clock.
            key_row_positions: optional int `(batch, capacity)`, with
                `row_positions`: each row's own position of each slot after
                this step (negative where it holds none of the row's). The
                slots are then the clock modulo the capacity (no sink slots:
                the caller keeps every position a row reads), and sink tokens
                are each row's first positions.
            rotary_lengths: optional int `(batch,)`, with `row_positions`:
                the length each row encodes, for a rope scaling that reads
                it (`dynamic`, `longrope`); default the longest position of
                the step plus one. Needs every rotary attention to compute
                in float32 (its tables are the step's).
            logits_at: optional int `(batch, k)`: only each row's tokens at
                these indices get logits (the final norm and the head run on
                those tokens alone), `(batch, k, vocab)`.
            query_owners, key_owners: optional int `(batch, n)` and `(batch,
                capacity)`, with `row_positions`: several sequences packed in
                one row, a query seeing only the slots of its own owner (the
                key owners cover the slots after this step, the new tokens'
                included). Positions then order the tokens within a row, and
                every sequence's own positions are `row_positions` and
                `key_row_positions`. A ValueError unless the model
                `packs_sequences`, or when one comes without the other.
            packing: optional `keras_attn.layers.packed.PackedRows`, with
                the owners: the step is laid out as the serving engine packs
                it (`packed`'s module docstring), and attention runs on the
                blocks of slots each query sees. The owners' mask must hide
                every slot outside those blocks.

        Returns:
            `(logits, cache)`: float `(batch, n, vocab)` logits (`(batch, k,
            vocab)` with `logits_at`; None when `logits` is False) and the
            updated cache.
        """
        if self.conditional != (condition is not None):
            raise ValueError(
                f"{self.model.name} "
                + ("takes a `condition` (it was built with conditional_layer_norm=...); "
                   "give one per row." if self.conditional else "takes no `condition`.")
            )
        if (query_owners is None) != (key_owners is None):
            raise ValueError("`query_owners` and `key_owners` are given together, or neither.")
        if packing is not None and query_owners is None:
            raise ValueError("`packing` describes packed sequences: give `query_owners` too.")
        if query_owners is not None and not self.packs_sequences:
            raise ValueError(
                f"{self.model.name} cannot pack several sequences in one row "
                "(`query_owners`): something in it compares positions across the row or "
                "reads a row's own state (see `CachedForward.packs_sequences`)."
            )
        length = token_ids.shape[1]
        capacity = cache.key_positions.shape[0]
        position = ops.cast(position, "int32")
        positions = position + ops.arange(length, dtype="int32")
        if key_row_positions is None:
            slot = self.slot(position, capacity)
        else:
            slot = ops.mod(position, capacity)
        key_positions = update_slots(cache.key_positions, slot, positions, axis=0)
        if self.masks_pad_tokens:
            real = masking.real_tokens(token_ids, self.pad_token_id)
        else:
            real = ops.ones_like(token_ids, "bool")
        if padding_mask is not None:
            real = ops.logical_and(real, ops.cast(padding_mask, "bool"))
        if segment_ids is None:
            segment_ids = ops.zeros_like(token_ids)
        segment_ids = ops.cast(segment_ids, "int32")
        writes = None if write_rows is None else ops.cast(write_rows, "int32")[:, None]

        def count(values):
            return ops.sum(values if writes is None else values * writes, axis=1)

        counted = ops.cast(real, "int32")
        orders = masking.unilm_orders(segment_ids, cache.segment_sums)
        key_valid = write_slots(cache.key_valid, real, slot, write_rows)
        key_orders = write_slots(cache.key_orders, orders, slot, write_rows)
        token_positions = None
        if self.count_from_padding:
            before = cache.real_tokens
            if write_rows is not None:
                # A row re-reading a position its cache holds (its prompt,
                # encoded in one pass) counts the real tokens before it there.
                earlier = ops.logical_and(
                    cache.key_valid, ops.less(cache.key_positions, position)[None]
                )
                before = ops.where(write_rows, before, ops.sum(ops.cast(earlier, "int32"), axis=1))
            token_positions = masking.real_token_positions(real, before)
        step = DecodeStep(CacheStep(
            slot, positions, key_positions, write_rows, token_positions, row_positions
        ), packing=packing)

        mask = masking.sequence_mask(
            key_valid,
            orders if self.unilm else None,
            key_orders if self.unilm else None,
        )
        if query_owners is not None:
            mask = ops.logical_and(mask, ops.equal(
                ops.cast(key_owners, "int32")[:, None, :],
                ops.cast(query_owners, "int32")[:, :, None],
            ))
        # Sink tokens read each row's own positions where the rows stand at
        # different ones; else the positions the slots hold.
        row_sinks = key_row_positions is not None
        masks = {
            (window, sinks): masking.merge_attention_masks(
                attention_mask=mask,
                use_causal_mask=self.causal,
                query_length=length,
                key_length=capacity,
                attention_window=window,
                blockwise=self.blockwise,
                query_positions=positions,
                key_positions=key_positions,
                sink_tokens=0 if row_sinks else sinks,
            )
            for window, sinks in dict.fromkeys(zip(self.windows, self.sink_tokens))
        }
        if row_sinks:
            for (window, sinks), band in masks.items():
                if window is not None and sinks:
                    masks[window, sinks] = ops.logical_or(band, masking.row_sink_mask(
                        mask, sinks, key_row_positions, positions, key_positions, self.causal
                    ))
        # The bias of every distance a query can have to a slot: a chunk
        # never wraps, so the slots hold positions within `capacity` of its
        # last token.
        distance_bias = None
        if self.position_bias is not None:
            distance_bias = self.position_bias.distance_table(capacity, length)

        plan = self.plan
        hidden = plan.embed(token_ids, segment_ids, condition=condition, step=step)
        if self.seq2seq != (source is not None):
            raise ValueError(
                f"{self.model.name}: an encoder-decoder's step needs the `source` "
                "(`encode_source`), and only an encoder-decoder's takes one."
            )
        # RoPE's tables of the new tokens, once per position object and widths.
        rotary_tables = shared_tables(
            [block.attention for block in self.blocks],
            lambda attention: attention.rotary_tables(
                step.cache_step.rotation_positions, rotary_lengths
            ),
        )
        layers = []
        for index, (block, layer_cache) in enumerate(zip(self.blocks, cache.layers)):
            cross = {}
            if source is not None:
                cross = {
                    "encoder_output": source.keys_values[index],
                    "encoder_mask": ops.expand_dims(source.valid, 1),
                }
            hidden, layer_cache = block(
                hidden, attention_mask=masks[self.windows[index], self.sink_tokens[index]],
                distance_bias=distance_bias,
                condition=condition,
                cache=layer_cache, step=step, rotary_tables=rotary_tables[index], **cross,
            )
            layers.append(layer_cache)
        cache = DecodingCache(
            tuple(layers),
            key_positions,
            key_valid,
            key_orders,
            cache.real_tokens + count(counted),
            cache.segment_sums + count(segment_ids),
        )
        if not logits:
            return None, cache
        if logits_at is not None:
            # The norm and head act on each token alone: a prompt chunk's
            # head reads only the token whose logits are used.
            picks = ops.cast(logits_at, "int32")
            hidden = ops.take_along_axis(
                hidden, ops.reshape(picks, tuple(picks.shape) + (1,)), axis=1
            )
        hidden = plan.finish_blocks(hidden, condition, step=step)
        return plan.language_model_head(hidden, condition, step=step), cache
