"""The serving engine's device side: the paged cache pools and the
programs that run the model on them."""

import keras
import numpy as np
from keras import ops

from keras_attn.generation.cached_forward import DecodingCache
from keras_attn.generation.cached_forward import EncodedSource
from keras_attn.layers.key_value_cache import KeyValueCache
from keras_attn.layers.key_value_cache import read_slots

ARGUMENTS = (
    "clock", "row_positions", "gather", "key_positions", "key_valid",
    "real_tokens", "padding_mask", "write", "last", "segment_ids", "key_orders",
    "segment_sums", "key_row_positions", "rotary_lengths", "query_owners", "key_owners",
)


class StepPrograms:
    """The key/value pools of an engine's paged cache (`entries` positions
    per layer), an encoder-decoder's source rows (`max_batch` rows of
    `source_length`), and the programs that run the model on them: one per
    shape of their arguments (`run`), compiled on first use
    (`compile_program`; on torch as `torch_compile` says, and `warming`
    compiles at once under `"auto"`), and the source encoding (`encode`).

    The engine builds the arguments (`ARGUMENTS`, see `step`); this holds
    what lives on the device between steps.
    """

    def __init__(self, forward, model, max_batch, entries, source_length, torch_compile):
        self.forward = forward
        self.model = model
        self.torch_compile = torch_compile
        self.compiled = {}
        self.warming = False
        self.pools = tuple(
            (cache.keys[0], cache.values[0])
            for cache in (block.attention.empty_cache(1, entries) for block in forward.blocks)
        )
        self.sources = None
        if forward.seq2seq:
            caches = tuple(
                block.cross_attention.empty_cache(max_batch, source_length)
                for block in forward.blocks
            )
            self.sources = EncodedSource(
                caches, ops.zeros((max_batch, source_length), "bool")
            )

    def run(self, arguments, capacity, source=None):
        """The float32 `(picks, vocab)` logits of one step on `arguments`
        (a dict of `ARGUMENTS`, None where absent, `tokens` and, for a
        packed step, its `packing`) over `capacity` slots, the tokens `last`
        picks in row order; the pools written."""
        packing = arguments.get("packing")
        key = (arguments["tokens"].shape, capacity, packing)
        program = self.compiled.get(key)
        if program is None:
            step = self.step
            if packing is not None:
                def step(*args):  # the layout is static: one program per layout
                    return self.step(*args, packing=packing)
            program = self.compiled[key] = self._compile(step)
        for _ in range(self._calls(program)):
            logits, self.pools = program(
                self.pools, arguments["tokens"], source,
                *[arguments.get(name) for name in ARGUMENTS],
            )
        return np.asarray(keras.ops.convert_to_numpy(logits), "float32")

    def encode(self, ids, valid):
        """The `EncodedSource` of source `ids` `(1, source_length)` with
        `valid` `(1, source_length)`."""
        program = self.compiled.get("encode")
        if program is None:
            program = self.compiled["encode"] = self._compile(self.encode_step)
        for _ in range(self._calls(program)):
            encoded, self.pools = program(self.pools, ids, None, valid.astype("int32"))
        return encoded

    def put_source(self, row, source):
        """Writes one request's encoded `source` into source row `row`."""
        self.sources = _with_row(self.sources, row, source)

    def _calls(self, program):
        """How many times a call runs `program`: once, and while `warming`
        as many times as compiling it takes (torch compiles a program from
        its recording at its second call, `CompiledStep.calls_to_compile`);
        a program run again on the scratch block writes the same entries."""
        step = getattr(program, "compiled_step", None)
        return step.calls_to_compile if self.warming and step is not None else 1

    def _compile(self, program):
        """`program` compiled (see `compile_program`); while `warming` on
        torch, compiled at its first call whatever the switch's `auto` rule."""
        mode = self.torch_compile
        if self.warming and mode == "auto":
            mode = "always"
        return compile_program(program, self.model, mode)

    def encode_step(self, pools, ids, source, valid):
        """An encoder-decoder's source encoded (`source` is None)."""
        return self.forward.encode_source(ids, valid), pools

    def step(self, pools, tokens, source, clock, row_positions, gather, key_positions, key_valid,
                 real_tokens, padding_mask, write, last, segment_ids, key_orders, segment_sums,
                 key_row_positions, rotary_lengths, query_owners, key_owners, packing=None):
        """One step of the model on the rows' blocks: gathers each row's
        slots from the pools, runs `CachedForward`, writes the new keys and
        values to the pools at `write` and returns the float32 logits of
        the tokens `last` `(rows, k)` picks, `(rows * k, vocab)` (the head
        runs on those tokens alone). `query_owners` and `key_owners` (or
        None) pack several requests in one row (`CachedForward`), laid out
        as `packing` says (a `PackedRows`, or None)."""
        length = tokens.shape[1]
        capacity = key_positions.shape[0]
        layers = tuple(
            KeyValueCache(ops.take(keys, gather, axis=0), ops.take(values, gather, axis=0))
            for keys, values in pools
        )
        cache = DecodingCache(
            layers, key_positions, ops.cast(key_valid, "bool"), key_orders, real_tokens,
            segment_sums,
        )
        logits, cache = self.forward(
            tokens, clock, cache, segment_ids=segment_ids, padding_mask=padding_mask,
            row_positions=row_positions, key_row_positions=key_row_positions, source=source,
            rotary_lengths=rotary_lengths if self.forward.length_dependent else None,
            logits_at=last, query_owners=query_owners, key_owners=key_owners, packing=packing,
        )
        slot = ops.mod(clock, capacity)
        entries = ops.reshape(write, (-1,))
        new_pools = []
        for (keys, values), layer in zip(pools, cache.layers):
            new_keys = read_slots(layer.keys, slot, length)
            new_values = read_slots(layer.values, slot, length)
            new_pools.append((
                _scatter(keys, entries, ops.reshape(new_keys, (-1,) + tuple(keys.shape[1:]))),
                _scatter(values, entries, ops.reshape(new_values, (-1,) + tuple(values.shape[1:]))),
            ))
        logits = ops.reshape(logits, (-1, logits.shape[-1]))
        return ops.cast(logits, "float32"), tuple(new_pools)


def _with_row(sources, row, source):
    """`sources` with row `row` replaced by `source` (one row, as wide)."""

    def put(buffer, value):
        start = (row,) + (0,) * (len(buffer.shape) - 1)
        return ops.slice_update(buffer, start, ops.cast(value, buffer.dtype))

    return EncodedSource(
        tuple(
            KeyValueCache(put(c.keys, s.keys), put(c.values, s.values))
            for c, s in zip(sources.keys_values, source.keys_values)
        ),
        put(sources.valid, source.valid),
    )


def compile_program(program, model, torch_compile="never"):
    """`program(pools, tokens, *arrays)` (arrays or structures of them, None
    kept) as one XLA program on JAX (pools donated) and TensorFlow; on torch
    under `torch.no_grad()`, pools written in place, compiled by
    `torch.compile` as `torch_compile` says (`"always"`, `"auto"`: once its
    eager calls took about what compiling costs, `"never"`; see
    `CompiledStep`, here without CUDA graphs; on the CPU from the program's
    recorded operations, at its second call), in whichever thread steps the
    engine (`CompiledStep` settles Keras' per-thread state first)."""
    backend = keras.config.backend()
    if backend == "jax":
        import jax

        variables = model.variables

        def stateless(values, pools, *args):
            with keras.StatelessScope(state_mapping=list(zip(variables, values))):
                return program(pools, *args)

        compiled = jax.jit(stateless, donate_argnums=(1,))
        return lambda pools, *args: compiled([v.value for v in variables], pools, *args)
    if backend == "tensorflow":
        import tensorflow as tf

        compiled = tf.function(program, jit_compile=True, reduce_retracing=False)
        return lambda pools, *args: compiled(
            pools, *_map_arrays(tf.convert_to_tensor, args)
        )
    if backend == "torch":
        import torch

        from keras_attn.torch_runtime.compiled_step import CompiledStep

        if torch_compile != "never":
            # On the CPU from its recording, at its second call (which
            # `Engine.warm_up` makes).
            program = CompiledStep(program, torch_compile, graphs=False)

        def run(pools, *args):
            with torch.no_grad():
                return program(pools, *_map_arrays(ops.convert_to_tensor, args))

        run.compiled_step = program if torch_compile != "never" else None
        return run
    return program


def _map_arrays(function, structure):
    """`structure` with `function` applied to each array, None kept."""
    return keras.tree.map_structure(lambda a: a if a is None else function(a), structure)


def _scatter(table, entries, updates):
    """`table` with rows `entries` set to `updates`; in place on torch."""
    updates = ops.cast(updates, table.dtype)
    if keras.config.backend() == "torch":
        return table.index_copy_(0, entries.long(), updates)
    return ops.scatter_update(table, ops.expand_dims(entries, -1), updates)
