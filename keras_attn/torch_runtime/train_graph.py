"""Training steps of a `TransformerModel` replayed as CUDA graphs."""

from keras_attn.torch_runtime.cuda_graph import CapturedGraph  # noqa: F401


def on_gpu(data):
    """Whether a training step's `data` (Keras' `(x, y, sample_weight)`)
    holds CUDA tensors (a step to capture)."""
    import optree

    return any(getattr(value, "is_cuda", False) for value in optree.tree_leaves(data))


class TrainGraphs:
    """The captured training steps of one model, by batch signature.

    (Interface; the captures come in the next change.)"""

    def __call__(self, model, data, step):
        return step(data)

    def describe(self):
        return "no step captured yet"
