"""Whole inference passes of a `TransformerModel` replayed as CUDA graphs."""

from keras_attn.torch_runtime.cuda_graph import CapturedGraph  # noqa: F401


def on_gpu(inputs):
    """Whether a pass's standardized `inputs` (a list of tensors) are on a
    CUDA device (a pass to capture)."""
    return any(getattr(value, "is_cuda", False) for value in inputs)


class PassGraphs:
    """The captured inference passes of one model, by input signature.

    (Interface; the captures come in the next change.)"""

    def __call__(self, model, run, inputs):
        return run(inputs)

    def describe(self):
        return "no pass captured yet"
