"""A compiled torch decoding step replayed as one CUDA graph."""

import optree

from keras_attn.torch_runtime.cuda_graph import CapturedGraph
from keras_attn.torch_runtime.cuda_graph import NotCapturable


class StepGraph(CapturedGraph):
    """One shape of a compiled decoding step (`compiled_step.CompiledStep`),
    captured as a CUDA graph and replayed: a step is one graph launch.

    The compiled step still launches each of its kernels from Python (some
    330 for GPT-2 small) after dynamo has checked its guards, host time of
    the order of the GPU's own work at small batches. A CUDA graph (`torch.cuda.CUDAGraph`) records those launches once, with
    the addresses of their tensors, and replays them for the price of one.

    Addresses are what a graph holds, so:

    - the step's tensor arguments are copied into buffers of the graph's own
      before each replay (the tokens, the step index, the lengths: a few
      bytes), except the cache's keys and values, which the step writes in
      place (`key_value_cache.update_slots`): the cache tensors passed at
      capture are the graph's, and later steps pass them back, so they are
      never copied. A cache with other tensors (beam search reorders the
      rows each step) is copied into them, as the compiled step would read
      it. The cache's small bookkeeping tensors (slot positions, validity),
      which the step writes as new tensors, get buffers of their own too;
    - the step's other arguments are constants of the graph (None, the
      decoding settings' numbers, the sampler's `next_tokens`): a replay
      with another constant is refused (`NotCapturable`);
    - the outputs (the logits, or with a sampler's `pick` the new tokens
      and finished rows) and the new bookkeeping tensors are the graph's
      buffers, overwritten by the next replay: copies are returned;
    - the model's weights are read at their addresses as they were at the
      capture, and the guards that `torch.compile` checks on every call
      (the model's structure, its variables) are not checked between
      replays. So a graph lives for one `generate` call only
      (`CompiledStep.new_run`), within which nothing changes the model:
      a model trained, re-quantized or given adapters between two calls
      is captured again.

    Capturing runs the step twice (once on a side stream, as CUDA requires
    before a capture, then recorded); both write the cache entries the step
    would write, with the same values. Which cache tensors the step writes
    in place is read off that first run: a tensor whose version moved and
    that holds what the step returns. A step that cannot be captured (an
    argument that is not a CUDA tensor, a cache tensor written in place but
    not returned, an operation a graph cannot record) raises
    `NotCapturable`, and `CompiledStep` runs the compiled step without a
    graph from then on: the same numbers.

    On by default; `KERAS_ATTN_TORCH_CUDA_GRAPHS=0` in the environment
    turns it off (`settings.TorchSettings.cuda_graphs`). What it saves is
    measured in docs/speed.md.

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
        """The step on `args` (`(forward, tokens, index, cache, lengths,
        condition, source, pick)` of the captured shapes and constants):
        `(outputs, cache)`, the cache's tensors written in place the graph's,
        the others, and the outputs (the logits, or what `pick` returns),
        copies."""
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
    """`(leaves, structure)` of a step's arguments or results (tuples,
    named tuples, None, tensors, numbers, the sampler's method), with
    `structure.unflatten(leaves)` the inverse. optree's (C++) rather than
    `keras.tree`, which on torch rebuilds the structure level by level, an
    order of magnitude slower for a many-layer cache (docs/speed.md). None
    is a leaf, as in `keras.tree`."""
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
