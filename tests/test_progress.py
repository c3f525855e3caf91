"""`keras_attn.progress.FitProgress`: `fit`'s progress as plain lines in a
file or a pipe, one line rewritten in place in a terminal, no time left
before the compiled steps, plural forms right."""

import io
import logging
import re

import keras
import numpy as np
import pytest

from keras_attn.progress import FitProgress
from keras_attn.progress import duration
from keras_attn.progress import plural

CONTROL = re.compile("[\r\b\x1b]")


class Terminal(io.StringIO):
    def isatty(self):
        return True


def tiny_fit(progress, epochs=2, examples=6):
    """`fit` of a one-Dense model, batches of 2, with `progress` only."""
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    model.compile("sgd", "mse")
    x = np.ones((examples, 2), "float32")
    model.fit(x, x[:, :1], batch_size=2, epochs=epochs, verbose=0, callbacks=[progress])


def drive(progress, epochs, steps, logs=None):
    """Keras' calls to a callback over `epochs` epochs of `steps` steps."""
    progress.set_params({"epochs": epochs, "steps": steps, "verbose": 0})
    for epoch in range(epochs):
        progress.on_epoch_begin(epoch)
        for batch in range(steps):
            progress.on_train_batch_end(batch, logs)
        progress.on_epoch_end(epoch, logs)


def test_fit_to_a_file_writes_plain_lines():
    stream = io.StringIO()
    tiny_fit(FitProgress(stream, every_seconds=0))  # a line after every step
    output = stream.getvalue()
    assert not CONTROL.search(output), repr(output)
    lines = output.splitlines()
    assert "" not in lines
    assert len(lines) == 2 * 3  # each epoch: steps 1 and 2, then its end
    assert lines[0].startswith("epoch 1/2: step 1/3, ")
    assert "left" not in lines[0]  # the first step compiles: no estimate yet
    assert lines[1].startswith("epoch 1/2: step 2/3, ") and " left, loss " in lines[1]
    assert re.match(r"epoch 1/2: 3 steps in .+ \(.+ a step after the first\), loss \d", lines[2])
    assert lines[5].startswith("epoch 2/2: 3 steps in ")


def test_plurals_and_one_step():
    stream = io.StringIO()
    drive(FitProgress(stream, prefix="  "), epochs=1, steps=1, logs={"loss": 0.5, "accuracy": 1e-4})
    assert re.fullmatch(r"  epoch 1/1: 1 step in \S+ s, loss 0.5000, accuracy 1.0000e-04\n",
                        stream.getvalue())
    assert [plural(n, "epoch") for n in (0, 1, 2)] == ["0 epochs", "1 epoch", "2 epochs"]
    assert [duration(s) for s in (0.25, 1.53, 12.4, 185, 3725)] == [
        "0.25 s", "1.5 s", "12 s", "3 min 05 s", "1 h 02 min"
    ]


def test_a_terminal_gets_one_line_per_epoch_rewritten_in_place():
    stream = Terminal()
    drive(FitProgress(stream), epochs=2, steps=3, logs={"loss": 0.5})
    output = stream.getvalue()
    assert "\r" in output and "\b" not in output and "\x1b" not in output
    assert output.endswith("\n")
    finished = [updates.split("\r")[-1] for updates in output[:-1].split("\n")]
    assert [line.split(" in ")[0] for line in finished] == ["epoch 1/2: 3 steps", "epoch 2/2: 3 steps"]


def test_without_interactive_logging_lines_go_to_the_logger(caplog):
    stream = Terminal()
    keras.config.disable_interactive_logging()
    try:
        with caplog.at_level(logging.INFO, logger="keras_attn"):
            drive(FitProgress(stream), epochs=1, steps=2)
    finally:
        keras.config.enable_interactive_logging()
    assert stream.getvalue() == ""
    assert [record.getMessage().split(" in ")[0] for record in caplog.records] == [
        "epoch 1/1: 2 steps"
    ]


def test_every_seconds_is_checked():
    with pytest.raises(ValueError, match=r"`every_seconds` must be a number >= 0; received -1"):
        FitProgress(every_seconds=-1)
