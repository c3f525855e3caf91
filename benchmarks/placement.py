"""Where each contender of a benchmark computes, so that a ratio compares
like with like.

Every contender runs on the device the Keras backend computes on: on a GPU,
transformers' model and inputs are moved there too, and the matmul peak is
measured there. A run whose contenders would compute on different kinds of
device (Keras on a GPU, transformers on the CPU because torch sees no GPU)
is refused before anything is timed (`check_placements`), and results
record each contender's device (`placements`).

Earlier GPU runs left transformers on the CPU while Keras ran on the GPU,
so their torch ratios compared a GPU with a CPU.
"""

import keras


class MixedDevicesError(RuntimeError):
    """Contenders of one benchmark would compute on different devices."""


def device_name():
    """The device the Keras backend computes on: `"cpu"`, or the
    accelerator's name (`"NVIDIA H100 80GB HBM3"`)."""
    backend = keras.config.backend()
    if backend == "jax":
        import jax

        device = jax.devices()[0]
        return "cpu" if device.platform == "cpu" else getattr(device, "device_kind", device.platform)
    if backend == "torch":
        import torch

        device = keras.ops.convert_to_tensor(0.0).device  # where Keras puts tensors
        return "cpu" if device.type == "cpu" else torch.cuda.get_device_name(device)
    import tensorflow as tf

    gpus = tf.config.list_physical_devices("GPU")
    return gpus[0].name if gpus else "cpu"


def device_kind(name):
    """`"cpu"` or `"gpu"` for a `device_name`."""
    return "cpu" if name == "cpu" else "gpu"


def torch_device():
    """The `torch.device` a torch peer (transformers) runs on: the GPU when
    Keras computes on one, else the CPU.

    Raises:
        MixedDevicesError: Keras computes on a GPU that torch cannot use
            (a CPU-only torch beside a GPU JAX or TensorFlow).
    """
    import torch

    name = device_name()
    if device_kind(name) == "cpu":
        return torch.device("cpu")
    if not torch.cuda.is_available():
        raise MixedDevicesError(
            f"Keras computes on {name!r}, but torch sees no GPU (torch "
            f"{torch.__version__}): transformers would run on the CPU. Install a CUDA "
            "build of torch, or leave the torch peers out of this run."
        )
    return torch.device("cuda")


def synchronize(device):
    """Waits for the work queued on a torch `device` (a no-op on the CPU), so
    a timed call ends when its computation does."""
    import torch

    if device.type == "cuda":
        torch.cuda.synchronize(device)


def check_placements(placements):
    """Refuses a run whose contenders compute on different kinds of device.

    Args:
        placements: `{contender: device name}`; a torch device's name is
            `"cpu"` or the GPU's (`torch_device_name`).

    Raises:
        MixedDevicesError: naming every contender and its device.
    """
    kinds = {device_kind(name) for name in placements.values()}
    if len(kinds) > 1:
        listed = ", ".join(f"{contender} on {name!r}" for contender, name in placements.items())
        raise MixedDevicesError(
            f"The contenders would compute on different devices ({listed}): their ratios "
            "would compare devices, not implementations. Run every contender on the "
            "backend's device."
        )
    return placements


def torch_device_name(device):
    """`device_name`'s spelling for a `torch.device`."""
    import torch

    return "cpu" if device.type == "cpu" else torch.cuda.get_device_name(device)
