"""A compiled torch decoding step replayed as one CUDA graph."""

import optree

from keras_attn.torch_runtime.cuda_graph import CapturedGraph
from keras_attn.torch_runtime.cuda_graph import NotCapturable


class StepGraph(CapturedGraph):
    """One shape of a compiled decoding step (`compiled_step.CompiledStep`),
    captured as a CUDA graph and replayed: a step is one graph launch.

    Before each replay the step's small tensor arguments (tokens, index,
    lengths) are copied into the graph's buffers; the cache's keys and values,
    which the step writes in place (`key_value_cache.update_slots`), are the
    graph's own and passed back (a cache with other tensors, as beam search
    reorders, is copied in). Other arguments are constants of the graph (a
    replay with another is `NotCapturable`). Outputs and new bookkeeping
    tensors are returned as copies. The weights are read where they were at
    the capture and dynamo's guards are not checked between replays, so a
    graph lives for one `generate` call (`CompiledStep.new_run`).

    Capturing runs the step on a side stream, then records it; the cache
    tensors written in place are read off that run. A step that cannot be
    captured raises `NotCapturable`, and `CompiledStep` runs without a graph
    from then on (the same numbers). `KERAS_ATTN_TORCH_CUDA_GRAPHS=0` turns
    graphs off.

    Args:
        function: the compiled step, `function(forward, tokens, index,
            cache, lengths, condition, source, pick) -> (outputs, cache)`
            (`generator.decoding_step`).
        args: the arguments of the step to capture; its cache becomes the
            graph's.
    """

    def __init__(self, function, args):
        forward, *rest = args
        parts = [flatten(part)[0] for part in rest]
        leaves = [leaf for part in parts for leaf in part]
        structure = flatten(rest)[1]
        for leaf in leaves:
            if _is_array(leaf) and not self.on_device(leaf):
                raise NotCapturable(
                    f"a step argument is {type(leaf).__name__}, not a CUDA tensor"
                )
        # Where the cache's tensors are among the leaves.
        start = sum(len(part) for part in parts[:CACHE])
        self.cache_leaves = slice(start, start + len(parts[CACHE]))
        cache = leaves[self.cache_leaves]
        # A first run, as CUDA requires before a capture, on copies of the
        # arguments but the cache's own tensors.
        versions = [leaf._version for leaf in cache]
        warm = [
            leaf if not _is_array(leaf) or start <= index < self.cache_leaves.stop
            else leaf.clone()
            for index, leaf in enumerate(leaves)
        ]
        _, written = self.warm_up(lambda: function(forward, *structure.unflatten(warm)))
        written = flatten(written)[0]
        if len(written) != len(cache):
            raise NotCapturable("the step returns a cache of another structure")
        # The cache tensors the step wrote in place (their version moved and
        # they hold what the step returns: the keys and values) stay the
        # graph's; the others (slot positions, validity, written as new
        # tensors) get buffers of the graph's own, and are returned copied.
        self.in_place = []
        for leaf, version, new in zip(cache, versions, written):
            moved = leaf._version != version
            if moved and not _equal(leaf, new):
                raise NotCapturable("the step writes a cache tensor it does not return")
            self.in_place.append(moved)
        kept = {start + index for index, moved in enumerate(self.in_place) if moved}
        self.inputs = [
            leaf if not _is_array(leaf) or index in kept else leaf.clone()
            for index, leaf in enumerate(leaves)
        ]
        self.args = (forward, *structure.unflatten(self.inputs))
        self.kinds = [_kind(buffer) for buffer in self.inputs]
        self.addresses = [_address(buffer) if _is_array(buffer) else None for buffer in self.inputs]
        try:
            self.outputs, self.cache = self.capture(lambda: function(*self.args))
        except Exception as error:  # noqa: BLE001 - any operation a graph cannot record
            raise NotCapturable(f"{type(error).__name__}: {error}") from error
        self.outputs_leaves, self.outputs_structure = flatten(self.outputs)
        self.cache_written, self.cache_structure = flatten(self.cache)

    def __call__(self, *args):
        """The step on `args` of the captured shapes and constants: `(outputs,
        cache)`, the cache's in-place tensors the graph's, the rest copies."""
        leaves = flatten(args[1:])[0]
        if args[0] is not self.args[0] or [_kind(leaf) for leaf in leaves] != self.kinds:
            raise NotCapturable("the step's arguments differ from the captured ones")
        for leaf, buffer, address in zip(leaves, self.inputs, self.addresses):
            if address is not None and leaf is not buffer and _address(leaf) != address:
                buffer.copy_(leaf)
        self.replay()
        cache = [
            buffer if kept else new.clone()
            for buffer, kept, new in zip(
                self.inputs[self.cache_leaves], self.in_place, self.cache_written
            )
        ]
        outputs = [output.clone() for output in self.outputs_leaves]
        return self.outputs_structure.unflatten(outputs), self.cache_structure.unflatten(cache)


# The cache's place among a step's arguments after `forward`: `(tokens,
# index, cache, lengths, condition, source)`.
CACHE = 2


def flatten(tree):
    """`(leaves, structure)` of a step's arguments or results, with
    `structure.unflatten(leaves)` the inverse; optree's, faster than
    `keras.tree` on torch for a many-layer cache. None is a leaf."""
    return optree.tree_flatten(tree, none_is_leaf=True)


def on_gpu(tokens):
    """Whether a step's `tokens` are a CUDA tensor (a step to graph)."""
    return getattr(tokens, "is_cuda", False)


def _equal(tensor, other):
    import torch

    return torch.equal(tensor, other)


def _address(tensor):
    """Where a tensor's values are: a buffer passed back is not copied."""
    return tensor.data_ptr(), tuple(tensor.shape), tuple(tensor.stride())


def _is_array(value):
    """Whether a step argument is an array (a tensor the graph holds a
    buffer for), not a constant (None, a number, the sampler's method)."""
    return hasattr(value, "shape")


def _kind(value):
    """What a replay's argument must match: a tensor's shape, dtype and
    device; a constant itself (the graph computed with it)."""
    if not _is_array(value):
        return value
    return tuple(value.shape), value.dtype, value.device
