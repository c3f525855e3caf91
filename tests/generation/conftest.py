"""Fixtures shared by the generation tests."""

import pytest

import keras_attn
from keras_attn.models import VARIANTS


@pytest.fixture
def registered_test_variants():
    """test_cached_forward's own variants (`TEST_VARIANTS`: a pre-LN one and
    one with its own position bias), registered for one test."""
    from tests.generation.test_cached_forward import TEST_VARIANTS

    for name, variant_class in TEST_VARIANTS.items():
        keras_attn.register_variant(name, variant_class)
    yield
    for name in TEST_VARIANTS:
        VARIANTS.pop(name, None)
