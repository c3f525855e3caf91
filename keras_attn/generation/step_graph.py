"""A compiled torch decoding step replayed as one CUDA graph."""

import os

import keras


class StepGraph:
    """One shape of a compiled decoding step (`generator.CompiledStep`),
    captured as a CUDA graph and replayed: a step is one graph launch.

    The compiled step still launches each of its kernels from Python (some
    330 for GPT-2 small) after dynamo has checked its guards (about 1.4 ms a
    step on an H200, more than the GPU's 2.2 ms of work at batch 8). A
    CUDA graph (`torch.cuda.CUDAGraph`) records those launches once, with
    the addresses of their tensors, and replays them for the price of one.

    Addresses are what a graph holds, so:

    - the step's tensor arguments are copied into buffers of the graph's own
      before each replay (the tokens, the step index, the lengths: a few
      bytes), except the cache, which the step writes in place
      (`key_value_cache.update_slots`) and returns: the cache passed at
      capture is the graph's, and later steps pass it back, so it is never
      copied. A cache with other tensors (beam search reorders the rows
      each step) is copied into it, as the compiled step would read it;
    - the logits are the graph's buffer, overwritten by the next replay:
      a copy is returned;
    - the model's weights are read at their addresses as they were at the
      capture, and the guards that `torch.compile` checks on every call
      (the model's structure, its variables) are not checked between
      replays. So a graph lives for one `generate` call only
      (`CompiledStep.new_run`), within which nothing changes the model:
      a model trained, re-quantized or given adapters between two calls
      is captured again.

    Capturing runs the step twice (once on a side stream, as CUDA requires
    before a capture, then recorded); both write the cache entries the step
    would write, with the same values. A step that cannot be captured (an
    argument that is not a CUDA tensor, a cache the step does not write in
    place, an operation a graph cannot record) raises `NotCapturable`, and
    `CompiledStep` runs the compiled step without a graph from then on:
    the same numbers.

    `KERAS_ATTN_TORCH_CUDA_GRAPHS=0` in the environment turns graphs off
    (`enabled`).

    Args:
        function: the compiled step, `function(forward, tokens, index,
            cache, lengths, condition, source) -> (logits, cache)`.
        args: the arguments of the step to capture; its cache becomes the
            graph's.
    """

    def __init__(self, function, args):
        import torch

        forward, *rest = args
        leaves = keras.tree.flatten(rest)
        cache_ids = {id(leaf) for leaf in keras.tree.flatten(rest[2])}
        for leaf in leaves:
            if leaf is not None and not (isinstance(leaf, torch.Tensor) and leaf.is_cuda):
                raise NotCapturable(
                    f"a step argument is {type(leaf).__name__}, not a CUDA tensor"
                )
        # The cache is the graph's; every other tensor gets a buffer.
        self.inputs = [
            leaf if leaf is None or id(leaf) in cache_ids else leaf.clone() for leaf in leaves
        ]
        self.args = (forward, *keras.tree.pack_sequence_as(rest, self.inputs))
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            function(*self.args)
        torch.cuda.current_stream().wait_stream(side)
        self.graph = torch.cuda.CUDAGraph()
        try:
            with torch.cuda.graph(self.graph):
                self.logits, self.cache = function(*self.args)
        except Exception as error:  # noqa: BLE001 - any operation a graph cannot record
            raise NotCapturable(f"{type(error).__name__}: {error}") from error
        written = [_address(leaf) for leaf in keras.tree.flatten(self.cache)]
        if written != [_address(leaf) for leaf in keras.tree.flatten(self.args[3])]:
            raise NotCapturable("the step returns a cache other than the one it was given")

    def __call__(self, *args):
        """The step on `args` (`(forward, tokens, index, cache, lengths,
        condition, source)` of the captured shapes): `(logits, cache)`, the
        cache the graph's."""
        leaves = keras.tree.flatten(args[1:])
        if args[0] is not self.args[0] or [_kind(leaf) for leaf in leaves] != [
            _kind(buffer) for buffer in self.inputs
        ]:
            raise NotCapturable("the step's arguments differ from the captured ones")
        for leaf, buffer in zip(leaves, self.inputs):
            if leaf is not None and _address(leaf) != _address(buffer):
                buffer.copy_(leaf)
        self.graph.replay()
        return self.logits.clone(), self.cache


class NotCapturable(RuntimeError):
    """A decoding step that a CUDA graph cannot replay exactly."""


def enabled():
    """Whether compiled torch decoding steps on a GPU run as CUDA graphs
    (`StepGraph`): unless `KERAS_ATTN_TORCH_CUDA_GRAPHS=0`."""
    value = os.environ.get("KERAS_ATTN_TORCH_CUDA_GRAPHS", "1")
    if value not in ("0", "1"):
        raise ValueError(
            f"KERAS_ATTN_TORCH_CUDA_GRAPHS={value!r}: use 1 (replay compiled decoding steps "
            "as CUDA graphs, the default) or 0 (launch their kernels one by one)."
        )
    return value == "1"


def on_gpu(tokens):
    """Whether a step's `tokens` are a CUDA tensor (a step to graph)."""
    return getattr(tokens, "is_cuda", False)


def _address(tensor):
    """Where a tensor's values are: a buffer passed back is not copied."""
    return tensor.data_ptr(), tuple(tensor.shape), tuple(tensor.stride())


def _kind(value):
    """What a graph's buffer must match: a tensor's shape, dtype and device."""
    if not hasattr(value, "data_ptr"):
        return type(value)
    return tuple(value.shape), value.dtype, value.device
