"""Fixtures of the model tests."""

import pytest


@pytest.fixture(autouse=True)
def restore_variant_registry():
    """Variants a test registers leave the registry when it ends."""
    from keras_attn.models import VARIANTS

    before = dict(VARIANTS)
    yield
    VARIANTS.clear()
    VARIANTS.update(before)


@pytest.fixture(scope="module", autouse=True)
def eager_decoding_steps():
    """The model tests decode with torch's eager step
    (`KERAS_ATTN_TORCH_COMPILE=0`, as tests/serving runs its programs):
    they check a family's numbers (against transformers, padded batches,
    adapters, int8), which the compiled step computes the same way. That
    each registered variant's compiled step decodes what its full pass does
    is tests/generation's registry-driven test (`test_one_forward_pass.py`),
    and the compiled step's features are tests/generation's and
    tests/torch_runtime's. On torch, the model files that generate took
    251 s compiling a step per model, 45 s without."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("KERAS_ATTN_TORCH_COMPILE", "0")
        yield
