"""The environment switches that choose how keras_attn runs on torch, read
and validated by one rule, all at once, at every call (see docs/torch.md,
The switches).

`1`, `true`, `on`, `yes` turn a switch on; `0`, `false`, `off`, `no` off
(any case); unset or empty keeps the default. A switch may take values of
its own (`auto`) or a folder. Anything else is a ValueError naming the
variable, its value and the accepted values."""

import dataclasses
import os
from typing import NamedTuple

ON = ("1", "true", "on", "yes")
OFF = ("0", "false", "off", "no")


class Switch(NamedTuple):
    """One environment switch.

    Attributes:
        default: its value when unset: True, False or one of `values`.
        meaning: what turning it on does (for messages and docs).
        values: lowercase values it takes besides on and off.
        folder: whether any other value names a folder (absolute, or
            starting with `~`, read back expanded)."""

    default: object
    meaning: str
    values: tuple = ()
    folder: bool = False


# Every switch keras_attn reads, by variable name.
SWITCHES = {
    "KERAS_ATTN_DIRECT_PASS": Switch(
        True, "eager torch passes of a TransformerModel run by DirectGraph, each layer "
        "by its `call` (off: Keras' own pass)",
    ),
    "KERAS_ATTN_COMPILE_BLOCKS": Switch(
        True, "compile(jit_compile=True) on torch compiles each block structure once "
        "(off: Keras' torch.compile of the whole step)",
    ),
    "KERAS_ATTN_TORCH_COMPILE": Switch(
        "auto", "torch decoding steps are compiled at each shape's first step (off: never "
        "compiled; auto: once a shape's eager steps have taken as long as compiling it)",
        values=("auto",),
    ),
    "KERAS_ATTN_TORCH_CUDA_GRAPHS": Switch(
        True, "compiled torch decoding steps on a GPU are replayed as CUDA graphs (off: "
        "their kernels are launched one by one)",
    ),
    "KERAS_ATTN_RECORDED_PASSES": Switch(
        True, "inference passes on the CPU at an input signature seen before replay the "
        "torch operations recorded from one pass (off: every pass runs its layers)",
    ),
    "KERAS_ATTN_RECORDED_STEPS": Switch(
        True, "a compiled torch decoding step on the CPU is first recorded as the torch "
        "operations it runs, and torch.compile compiles that recording, not the step's "
        "Python (a shorter first call; off: torch.compile traces the step's Python)",
    ),
    "KERAS_ATTN_TORCH_COMPILE_CACHE": Switch(
        True, "torch's compile caches of what keras_attn compiles are kept in one folder "
        "across processes: the user's TORCHINDUCTOR_CACHE_DIR, else keras_attn/torch_compile "
        "under $XDG_CACHE_HOME or ~/.cache (off: torch's own settings; a folder: that folder)",
        folder=True,
    ),
}


def read_switch(name):
    """The value of the environment switch `name` (a key of `SWITCHES`): True,
    False, one of its `values`, a folder path, or its `default` when unset or
    empty.

    Raises:
        KeyError: `name` is not a switch of `SWITCHES`.
        ValueError: any other value; the message names the variable, its
            value and the accepted values.
    """
    switch = SWITCHES[name]
    value = os.environ.get(name, "")
    if value == "":
        return switch.default
    spelling = value.lower()
    if spelling in ON:
        return True
    if spelling in OFF:
        return False
    if spelling in switch.values:
        return spelling
    if switch.folder and (os.path.isabs(value) or value.startswith("~")):
        return os.path.expanduser(value)
    accepted = "/".join(ON) + " (on), " + "/".join(OFF) + " (off)"
    if switch.values:
        accepted += ", " + ", ".join(switch.values)
    if switch.folder:
        accepted += ", an absolute folder path (or one starting with ~)"
    raise ValueError(
        f"{name}={value!r} is not a switch value: use {accepted}, in any case, or leave "
        f"it unset for the default ({_shown(switch.default)}). On: {switch.meaning}."
    )


def _shown(value):
    return {True: "on", False: "off"}.get(value, value)


@dataclasses.dataclass(frozen=True)
class TorchSettings:
    """Every switch of `SWITCHES`, read and validated together (`current`).

    Attributes:
        direct_pass: `KERAS_ATTN_DIRECT_PASS`: eager passes run each layer
            by its `call` (`DirectGraph`).
        compile_blocks: `KERAS_ATTN_COMPILE_BLOCKS`: `jit_compile=True`
            compiles each block structure once (`CompiledBlocks`).
        torch_compile: `KERAS_ATTN_TORCH_COMPILE` as a mode: `"always"`,
            `"never"` or `"auto"` (`CompiledStep`).
        cuda_graphs: `KERAS_ATTN_TORCH_CUDA_GRAPHS`: work on a GPU replays
            captured CUDA graphs (decoding steps, inference passes,
            training steps).
        recorded_passes: `KERAS_ATTN_RECORDED_PASSES`: inference passes on
            the CPU replay their recorded operations (`RecordedPass`).
        recorded_steps: `KERAS_ATTN_RECORDED_STEPS`: a compiled decoding
            step on the CPU compiles its recorded operations (`RecordedStep`).
        compile_cache: `KERAS_ATTN_TORCH_COMPILE_CACHE`: True (the default
            folder), False (torch's own settings) or a folder.
    """

    direct_pass: bool
    compile_blocks: bool
    torch_compile: str
    cuda_graphs: bool
    recorded_passes: bool
    recorded_steps: bool
    compile_cache: object


def current():
    """The `TorchSettings` the environment holds now; raises the ValueError
    of `read_switch` for the first switch set to a value it does not take."""
    values = {name: read_switch(name) for name in SWITCHES}
    mode = values["KERAS_ATTN_TORCH_COMPILE"]
    return TorchSettings(
        direct_pass=values["KERAS_ATTN_DIRECT_PASS"],
        compile_blocks=values["KERAS_ATTN_COMPILE_BLOCKS"],
        torch_compile={True: "always", False: "never"}.get(mode, mode),
        cuda_graphs=values["KERAS_ATTN_TORCH_CUDA_GRAPHS"],
        recorded_passes=values["KERAS_ATTN_RECORDED_PASSES"],
        recorded_steps=values["KERAS_ATTN_RECORDED_STEPS"],
        compile_cache=values["KERAS_ATTN_TORCH_COMPILE_CACHE"],
    )
