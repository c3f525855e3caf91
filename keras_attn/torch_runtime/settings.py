"""The environment switches that choose how keras_attn runs on torch, read
by one rule.

Every switch takes the same spellings, case-insensitively: `1`, `true`,
`on` or `yes` turn it on; `0`, `false`, `off` or `no` turn it off; unset
(or set to the empty string) leaves its default. A switch may take values
of its own besides (`KERAS_ATTN_TORCH_COMPILE=auto`). Anything else is a
ValueError naming the variable, its value and the accepted values, so that
a typo never silently keeps the default.

Each switch is read where it takes effect, at each use, so setting it
between calls takes effect at the next one.
"""

import os
from typing import NamedTuple

ON = ("1", "true", "on", "yes")
OFF = ("0", "false", "off", "no")


class Switch(NamedTuple):
    """One environment switch.

    Attributes:
        default: what it reads as when unset: True, False or one of
            `values`.
        meaning: what turning it on does (for error messages and docs).
        values: values it takes besides on and off (lowercase), read back
            as themselves.
    """

    default: object
    meaning: str
    values: tuple = ()


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
}


def read_switch(name):
    """The value of the environment switch `name` (a key of `SWITCHES`):
    True (on), False (off), one of the switch's own `values`, or its
    `default` when the variable is unset or empty.

    Raises:
        KeyError: `name` is not a switch of `SWITCHES`.
        ValueError: the variable holds anything else; the message names it,
            its value and the accepted values.
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
    accepted = "/".join(ON) + " (on), " + "/".join(OFF) + " (off)"
    if switch.values:
        accepted += ", " + ", ".join(switch.values)
    raise ValueError(
        f"{name}={value!r} is not a switch value: use {accepted}, in any case, or leave "
        f"it unset for the default ({_shown(switch.default)}). On: {switch.meaning}."
    )


def _shown(value):
    return {True: "on", False: "off"}.get(value, value)
