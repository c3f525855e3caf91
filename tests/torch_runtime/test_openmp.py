"""`release_thread_pool` (keras_attn.torch_runtime.openmp): the calling
thread's OpenMP workers end, and come back at its next parallel region."""

import os
import sys

import pytest

torch = pytest.importorskip("torch")

from keras_attn.torch_runtime.openmp import release_thread_pool  # noqa: E402


def threads():
    return len(os.listdir("/proc/self/task"))


def parallel_region():
    # An element-wise op over more elements than one thread's grain.
    torch.ones(1 << 20).exp_()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="libgomp on Linux")
def test_the_calling_threads_workers_end_and_come_back():
    if torch.get_num_threads() < 2:
        pytest.skip("torch runs one thread here: no pool of workers")
    if "OpenMP" not in torch.__config__.parallel_info():
        pytest.skip("torch does not use OpenMP here")
    parallel_region()
    before = threads()
    assert release_thread_pool()
    released = threads()
    assert released <= before - 1
    parallel_region()
    assert threads() >= released + 1
