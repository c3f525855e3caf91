"""Messages about long work: compiling a decoding program (`say`,
`announced_if_slow`, on stderr) and `fit`'s progress (`FitProgress`, on
stdout). `keras.config.disable_interactive_logging()` sends both to the
`keras_attn` logger at INFO level."""

import contextlib
import logging
import sys
import threading
import time

import keras

# Work that has not finished after this many seconds says what it is doing.
ANNOUNCE_AFTER_SECONDS = 1.0


def say(message, interactive=None):
    """Writes `keras_attn: message` to stderr, or logs it at INFO level when
    Keras' interactive logging is disabled. `interactive` is that setting
    as the caller's thread has it (Keras keeps it per thread), read now
    when None."""
    if interactive is None:
        interactive = keras.config.is_interactive_logging_enabled()
    if interactive:
        sys.stderr.write(f"keras_attn: {message}\n")
        sys.stderr.flush()
    else:
        logging.getLogger("keras_attn").info(message)


@contextlib.contextmanager
def announced_if_slow(what, done):
    """Runs the body; if it is still running after `ANNOUNCE_AFTER_SECONDS`,
    says `what ...`, and when it ends `done in N s`. Quick work prints
    nothing."""
    started = time.perf_counter()
    interactive = keras.config.is_interactive_logging_enabled()
    said = threading.Event()

    def announce():
        say(f"{what} ...", interactive)
        said.set()

    timer = threading.Timer(ANNOUNCE_AFTER_SECONDS, announce)
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        timer.cancel()
        timer.join()
        if said.is_set():
            say(f"{done} in {time.perf_counter() - started:.1f} s", interactive)


def plural(count, noun):
    """`count` and `noun`, the noun plural unless the count is 1: `1 epoch`,
    `2 epochs`, `0 steps`."""
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


def duration(seconds):
    """Seconds as a person reads them: `0.42 s`, `1.5 s`, `12 s`,
    `3 min 05 s`, `1 h 02 min`."""
    if seconds < 1:
        return f"{seconds:.2f} s"
    if seconds < 10:
        return f"{seconds:.1f} s"
    if seconds < 60:
        return f"{seconds:.0f} s"
    minutes, seconds = divmod(int(round(seconds)), 60)
    if minutes < 60:
        return f"{minutes} min {seconds:02d} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min"


class FitProgress(keras.callbacks.Callback):
    """The progress of `fit`, readable in a terminal and in a log file: a
    callback in place of Keras' progress bar (pass `verbose=0` to `fit`).

    To a terminal it rewrites one line per epoch with a carriage return: the
    epoch, the step, the elapsed time, the time left and the running metrics.
    To anything else it writes plain lines: at most one every
    `every_seconds`, and one per finished epoch with its steps, time, time
    per step after the first and metrics (validation included). The time
    left is estimated from the steps after the first (which compiles), so
    none is shown before the second step ends. With interactive logging
    disabled the lines go to the `keras_attn` logger at INFO level.

    Args:
        stream: a text stream, or None for `sys.stdout` (read at each write).
        every_seconds: the least time between two lines within an epoch
            when the stream is not a terminal.
        prefix: text that starts every line, e.g. an indent.

    Example:

    ```python
    model.fit(train, epochs=3, verbose=0, callbacks=[keras_attn.progress.FitProgress()])
    ```
    """

    def __init__(self, stream=None, every_seconds=10.0, prefix=""):
        super().__init__()
        if not isinstance(every_seconds, (int, float)) or every_seconds < 0:
            raise ValueError(
                f"FitProgress: `every_seconds` must be a number >= 0; received {every_seconds!r}."
            )
        self.stream = stream
        self.every_seconds = every_seconds
        self.prefix = prefix
        self._width = 0

    # Keras' hooks ------------------------------------------------------------

    def on_epoch_begin(self, epoch, logs=None):
        self._epoch = epoch
        self._started = time.perf_counter()
        self._first_step_ended = None
        self._steps = 0
        self._last_line = self._started
        self._width = 0

    def on_train_batch_end(self, batch, logs=None):
        self._steps = batch + 1
        now = time.perf_counter()
        if self._steps == 1:
            self._first_step_ended = now
        if self._in_place():
            if now - self._last_line >= 0.1 or self._steps == 1:
                self._rewrite(self._running_line(now, logs))
                self._last_line = now
        elif now - self._last_line >= self.every_seconds and self._steps != self._total_steps():
            self._write(self._running_line(now, logs))
            self._last_line = now

    def on_epoch_end(self, epoch, logs=None):
        now = time.perf_counter()
        parts = [
            f"{self._epoch_label()}: {plural(self._steps, 'step')} in "
            f"{duration(now - self._started)}"
        ]
        if self._steps > 1:
            per_step = (now - self._first_step_ended) / (self._steps - 1)
            parts[0] += f" ({duration(per_step)} a step after the first)"
        parts += _metrics(logs)
        line = self.prefix + ", ".join(parts)
        if self._in_place():
            self._rewrite(line)
            self._stream().write("\n")
            self._stream().flush()
        else:
            self._write(line)
        self._width = 0

    # Lines -------------------------------------------------------------------

    def _epoch_label(self):
        epochs = self.params.get("epochs") if self.params else None
        return f"epoch {self._epoch + 1}" + (f"/{epochs}" if epochs else "")

    def _total_steps(self):
        return self.params.get("steps") if self.params else None

    def _running_line(self, now, logs):
        total = self._total_steps()
        step = f"step {self._steps}" + (f"/{total}" if total else "")
        parts = [f"{self._epoch_label()}: {step}", duration(now - self._started)]
        if total and self._steps >= 2:
            per_step = (now - self._first_step_ended) / (self._steps - 1)
            parts.append(f"{duration(per_step * (total - self._steps))} left")
        return self.prefix + ", ".join(parts + _metrics(logs))

    def _stream(self):
        return sys.stdout if self.stream is None else self.stream

    def _in_place(self):
        """Whether the line is rewritten in place: a terminal, with Keras'
        interactive logging on."""
        if not keras.config.is_interactive_logging_enabled():
            return False
        isatty = getattr(self._stream(), "isatty", None)
        try:
            return bool(isatty and isatty())
        except ValueError:  # a closed stream
            return False

    def _rewrite(self, line):
        stream = self._stream()
        stream.write("\r" + line + " " * max(0, self._width - len(line)))
        stream.flush()
        self._width = len(line)

    def _write(self, line):
        if keras.config.is_interactive_logging_enabled():
            stream = self._stream()
            stream.write(line + "\n")
            stream.flush()
        else:
            logging.getLogger("keras_attn").info(line)


def _metrics(logs):
    """`name value` for each number in a Keras logs dict, as Keras formats
    them (4 decimals, or 4 significant digits in scientific notation for
    values of magnitude 1e-3 or less)."""
    parts = []
    for name, value in (logs or {}).items():
        try:
            value = float(value)
        except (TypeError, ValueError):
            continue
        parts.append(f"{name} {value:.4f}" if abs(value) > 1e-3 else f"{name} {value:.4e}")
    return parts
