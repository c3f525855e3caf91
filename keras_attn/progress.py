"""Messages for the user about long work (compiling a decoding program),
written to stderr like Keras' own progress output, and silenced the same
way: `keras.config.disable_interactive_logging()` sends them to the
`keras_attn` logger at INFO level instead."""

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
