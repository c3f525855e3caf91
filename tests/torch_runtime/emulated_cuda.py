"""CUDA's capture and replay emulated on the CPU, for the runtime's
captured graphs (`keras_attn.torch_runtime.cuda_graph.CapturedGraph`).

`EmulatedCuda` goes first among a graph class's bases: every CPU tensor
counts as on the device, the warm-up is a plain run, the capture runs the
function and keeps it, and a replay runs it again and copies what it
returns into the tensors the capture returned, as a real graph writes its
fixed output buffers. Everything else (which arguments get buffers, what
is copied in and out, when a graph is refused or captured again) is the
graph class's own, so the tests check it on the CPU."""

import optree


class EmulatedCuda:
    @staticmethod
    def on_device(tensor):
        import torch

        return isinstance(tensor, torch.Tensor)

    def warm_up(self, run):
        return run()

    def capture(self, run):
        self.run = run
        self.captured = run()
        return self.captured

    def replay(self):
        captured = optree.tree_leaves(self.captured, none_is_leaf=True)
        new = optree.tree_leaves(self.run(), none_is_leaf=True)
        for old, value in zip(captured, new):
            if hasattr(old, "copy_") and old is not value:
                old.copy_(value)
