"""Torch's OpenMP threads, for a model that runs in a thread of its own."""

import ctypes
import os
import sys

# `omp_pause_soft` of the OpenMP 5.0 API.
_PAUSE_SOFT = 1


def release_thread_pool():
    """Hands back the calling thread's OpenMP worker threads, so that torch
    operations in another thread (a serving engine's steps) run at full
    speed. Returns whether libgomp could be asked to.

    GNU OpenMP (libgomp, which torch's Linux wheels load) keeps a pool of
    worker threads for each thread that ran a parallel region. Once the
    pools together hold more threads than there are CPUs, each worker,
    between two regions, goes to sleep almost at once instead of spinning
    a while, and every operation then pays for waking it. A model built in
    the main thread and then run in another is in that state: the main
    thread's pool outlives its work. Handing it back (`omp_pause_resource_all`)
    ends its workers; the calling thread gets a pool again the next time it
    runs a parallel region, nothing else changes.

    Does nothing and returns False where libgomp is not loaded (another
    platform or OpenMP runtime) or is too old to pause (before OpenMP 5.0).
    """
    if not sys.platform.startswith("linux"):
        return False
    try:
        # The copy already loaded (torch's), never a new one.
        library = ctypes.CDLL("libgomp.so.1", mode=os.RTLD_NOLOAD | os.RTLD_LAZY)
        pause = library.omp_pause_resource_all
    except (OSError, AttributeError):
        return False
    pause.argtypes = [ctypes.c_int]
    pause.restype = ctypes.c_int
    return pause(_PAUSE_SOFT) == 0
