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

