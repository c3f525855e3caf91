"""The key/value cache of one attention layer, for autoregressive decoding."""

from typing import NamedTuple
from typing import Optional

import keras
from keras import ops


def check_cache_step(layer, cache_step):
    """Raises a ValueError naming `layer` when a call with a cache has no
    `cache_step`."""
    if cache_step is None:
        raise ValueError(
            f"{layer.name}: a call with `cache=` needs `cache_step` (a "
            "`keras_attn.layers.CacheStep` saying where the new tokens go). To "
            "attend to keys and values computed once (an encoder's output, "
            "see `project_key_value`), use `attend_projected`."
        )


class CacheStep(NamedTuple):
    """Where the new tokens of a decoding step go, shared by every layer.

    Given to a layer or a model hook, it is what says "this is a decoding
    step" (`cache_step=`): the full pass gives none.

    Attributes:
        slot: int32 scalar, the cache slot of the first new token; the `n`
            new tokens fill slots `slot .. slot + n - 1`.
        positions: int32 `(n,)`, the absolute positions of the new tokens
            (RoPE/XPOS rotate queries and keys at them).
        key_positions: int32 `(capacity,)`, the absolute position each slot
            holds once this step has written (negative for an empty slot).
        write_rows: optional boolean `(batch,)`: rows whose cache this step
            writes. A row that already holds these positions (a prompt
            encoded in one pass, as UniLM's source is, bidirectionally)
            keeps them.
        token_positions: optional int32 `(batch, n)`: the rows of a
            position table the new tokens read, where they differ from
            `positions` (RoBERTa numbers real tokens only, negative for
            padding); None reads `positions`.
        row_positions: optional int32 `(batch, n)`: each row's own
            positions of the new tokens, where the rows of a batch stand at
            different positions (`keras_attn.serving`'s engine). `positions`
            and `key_positions` are then a clock shared by the rows, whose
            differences equal each row's own: masks and relative distances
            read the clock, while rotations and position tables read these.
    """

    slot: object
    positions: object
    key_positions: object
    write_rows: Optional[object] = None
    token_positions: Optional[object] = None
    row_positions: Optional[object] = None

    @property
    def embedding_positions(self):
        """The rows of a position table the new tokens read."""
        if self.token_positions is not None:
            return self.token_positions
        return self.positions if self.row_positions is None else self.row_positions

    @property
    def rotation_positions(self):
        """The positions RoPE rotates the new queries and keys at: `(n,)`,
        or `(batch, n)` with `row_positions`."""
        return self.positions if self.row_positions is None else self.row_positions


class KeyValueCache(NamedTuple):
    """Keys and values of one attention layer for `capacity` positions.

    `keys`: `(batch, capacity, key_heads, key_size)`, stored after RoPE's
    rotation (not XPOS's decay, which is applied relative to each step's
    queries); `values`: `(batch, capacity, value_heads, head_size)`. The two
    widths are independent, as the layer's are (decoupled `key_size`,
    talking heads' key and value heads). A cache of `capacity` smaller than
    the sequence is a ring: the slot of position `p` is `p % capacity`.
    """

    keys: object
    values: object

    @classmethod
    def empty(cls, batch, capacity, key_heads, key_size, value_heads, head_size, dtype):
        """A cache of zeros."""
        return cls(
            ops.zeros((batch, capacity, key_heads, key_size), dtype),
            ops.zeros((batch, capacity, value_heads, head_size), dtype),
        )

    def write(self, keys, values, step):
        """The cache with `keys`, `values` (`(batch, n, heads, size)`) in the
        slots `step.slot ..`, for the rows `step.write_rows` (all rows when
        None). On torch the tensors are written in place (the returned cache
        holds them), so a cache is not reused after it was written."""
        return KeyValueCache(
            _write(self.keys, keys, step), _write(self.values, values, step)
        )


def write_slots(table, new, slot, write_rows=None, in_place=False):
    """`table` `(batch, capacity, ...)` with `new` `(batch, n, ...)` in the
    slots `slot .. slot + n - 1`, for the rows `write_rows` (boolean
    `(batch,)`; every row when None), the other rows keeping what they
    held. Returns a new tensor, or on torch with `in_place` `table` itself,
    written (see `KeyValueCache.write`)."""
    new = ops.cast(new, table.dtype)
    if write_rows is not None:
        old = read_slots(table, slot, new.shape[1])
        rows = ops.reshape(write_rows, (-1,) + (1,) * (len(table.shape) - 1))
        new = ops.where(rows, new, old)
    return update_slots(table, slot, new, axis=1, in_place=in_place)


def slot_indices(slot, n):
    """int `(n,)`: the slots `slot .. slot + n - 1`."""
    return ops.cast(slot, "int32") + ops.arange(n, dtype="int32")


def read_slots(table, slot, n, axis=1):
    """The `n` entries of `table` from `slot` on along `axis`."""
    if keras.config.backend() == "torch":
        # By index, not by slice: a tensor `slot` in a slice is a Python int
        # to torch.compile, which would compile one graph per slot.
        return table.index_select(axis, slot_indices(slot, n))
    start = [0] * len(table.shape)
    start[axis] = slot
    size = list(table.shape)
    size[axis] = n
    return ops.slice(table, start, size)


def update_slots(table, slot, new, axis=1, in_place=False):
    """`table` with `new` in the entries `slot ..` along `axis`; on torch
    with `in_place` it writes `table` itself."""
    if keras.config.backend() == "torch":
        index = ops.cast(slot_indices(slot, new.shape[axis]), "int64")
        if in_place:
            return table.index_copy_(axis, index, new)
        return table.index_copy(axis, index, new)
    start = [0] * len(table.shape)
    start[axis] = slot
    return ops.slice_update(table, start, new)


def _write(cache, new, step):
    # In place on torch: `slice_update` copies the whole cache there, an
    # O(capacity) copy per layer and step.
    return write_slots(
        cache, new, step.slot, step.write_rows, in_place=keras.config.backend() == "torch"
    )
