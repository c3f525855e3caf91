"""The environment switches (`keras_attn.torch_runtime.settings`): one rule for every
switch, at the place that reads it (issue 54, item 19: `false`, `off` and
`no` read as on for two switches, refused by the other two)."""

import pathlib
import re

import keras
import pytest

import keras_attn
from keras_attn.torch_runtime import settings
from keras_attn.torch_runtime import compile_cache
from keras_attn.torch_runtime import compiled_step

# How the runtime reads each switch: every one together (`settings.current`).
READERS = {
    "KERAS_ATTN_DIRECT_PASS": lambda: settings.current().direct_pass,
    "KERAS_ATTN_COMPILE_BLOCKS": lambda: settings.current().compile_blocks,
    "KERAS_ATTN_TORCH_CUDA_GRAPHS": lambda: settings.current().cuda_graphs,
    "KERAS_ATTN_RECORDED_PASSES": lambda: settings.current().recorded_passes,
    "KERAS_ATTN_RECORDED_STEPS": lambda: settings.current().recorded_steps,
    # "always" / "never" / "auto" on torch; None (nothing read) elsewhere.
    "KERAS_ATTN_TORCH_COMPILE": compiled_step.torch_compile_mode,
    # True (the default folder) / False / a folder path.
    "KERAS_ATTN_TORCH_COMPILE_CACHE": compile_cache.setting,
}
COMPILE_MODES = {True: "always", False: "never", "auto": "auto"}


def read(name, monkeypatch, value):
    if value is None:
        monkeypatch.delenv(name, raising=False)
    else:
        monkeypatch.setenv(name, value)
    result = READERS[name]()
    if name == "KERAS_ATTN_TORCH_COMPILE":
        if keras.config.backend() != "torch":
            return settings.read_switch(name)
        return {mode: value for value, mode in COMPILE_MODES.items()}[result]
    return result


def test_every_switch_in_the_package_is_registered_and_read_here():
    source = pathlib.Path(keras_attn.__file__).parent
    named = {
        match for path in source.rglob("*.py")
        for match in re.findall(r"KERAS_ATTN_[A-Z_]+[A-Z]", path.read_text(encoding="utf-8"))
    }
    assert named == set(settings.SWITCHES) == set(READERS)


@pytest.mark.parametrize("name", sorted(settings.SWITCHES))
def test_each_switch_accepts_every_spelling_and_keeps_its_default(name, monkeypatch):
    assert read(name, monkeypatch, None) == settings.SWITCHES[name].default
    assert read(name, monkeypatch, "") == settings.SWITCHES[name].default
    for spellings, expected in ((settings.ON, True), (settings.OFF, False)):
        for spelling in spellings:
            for value in (spelling, spelling.upper(), spelling.capitalize()):
                assert read(name, monkeypatch, value) is expected, value
    for value in settings.SWITCHES[name].values:
        assert read(name, monkeypatch, value.upper()) == value


@pytest.mark.parametrize("name", sorted(settings.SWITCHES))
@pytest.mark.parametrize("value", ["2", "enabled", "nope", " 1", "-1"])
def test_each_switch_refuses_another_value_by_name(name, value, monkeypatch):
    monkeypatch.setenv(name, value)
    with pytest.raises(ValueError) as error:
        if name == "KERAS_ATTN_TORCH_COMPILE" and keras.config.backend() != "torch":
            settings.read_switch(name)
        else:
            READERS[name]()
    message = str(error.value)
    assert f"{name}={value!r}" in message
    assert "true/on/yes" in message and "false/off/no" in message


def test_a_bad_value_of_any_switch_is_reported_whichever_path_reads(monkeypatch):
    """The runtime reads every switch at once (`settings.current`): a typo
    in the decoding step's switch stops a plain model call too, rather than
    waiting for the first `generate`."""
    for name in settings.SWITCHES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("KERAS_ATTN_TORCH_COMPILE", "sometimes")
    with pytest.raises(ValueError, match="KERAS_ATTN_TORCH_COMPILE='sometimes'"):
        settings.current()
