"""`.keras` files written by an earlier commit load, compute the outputs
they computed and generate the same greedy tokens (issue 31, item 4).

The files are tiny random models committed under tests/fixtures/, one per
model walk that a restructuring could break: GPT-2 (`lm`: learned
positions, the tied head), T5 v1.1 (`seq2seq`: the encoder-decoder walk,
relative position buckets, the untied head) and RoFormer (`unilm`: rotary
positions and UniLM's segment mask in the cached step). They were written
by tests/fixtures/make_saved_files.py with the code of the commit in their
name; a later release adds its own files and this test picks them up.

tests/fixtures/variants/ holds one file per registered variant (its first
application), written by tests/fixtures/make_variant_files.py before the
composable-architecture restructuring (issue 51): every variant's walk
must keep loading and computing what it computed.
"""

import glob
import json
import os

import keras
import numpy as np
import pytest

from keras_attn.models.variants import variant_name
from tests.harness import to_numpy

FIXTURES = os.path.join(os.path.dirname(os.path.dirname(__file__)), "fixtures")
RECORDS = sorted(glob.glob(os.path.join(FIXTURES, "*_saved.json")))
VARIANT_RECORDS = sorted(glob.glob(os.path.join(FIXTURES, "variants", "*_saved.json")))


def test_the_fixtures_are_there():
    """An empty glob would skip every case below without a word."""
    assert len(RECORDS) >= 3, RECORDS
    saved = {json.load(open(path))["variant"] for path in VARIANT_RECORDS}
    # Every variant registered when the files were written (a variant added
    # later gets its file with the next release's files).
    assert len(saved) >= 34, sorted(saved)


@pytest.mark.parametrize("record_path", RECORDS + VARIANT_RECORDS, ids=os.path.basename)
def test_a_saved_file_loads_computes_and_generates_as_it_did(record_path, monkeypatch):
    # What is under test is the file; torch.compile of the decoding step
    # (about 14 s a model on a CPU) is tested elsewhere and computes the
    # same tokens as the eager step.
    monkeypatch.setenv("KERAS_ATTN_TORCH_COMPILE", "0")
    stem = record_path.removesuffix("_saved.json")
    with open(record_path) as file:
        record = json.load(file)
    model = keras.saving.load_model(f"{stem}.keras")
    assert variant_name(type(model.template)) == record["variant"]
    saved = dict(np.load(f"{stem}_outputs.npz"))
    inputs = {name: saved.pop(name) for name in model.named_inputs}
    outputs = model(inputs)
    outputs = outputs if isinstance(outputs, dict) else {"output": outputs}
    assert sorted(outputs) == sorted(saved)
    for name, expected in saved.items():
        np.testing.assert_allclose(to_numpy(outputs[name]), expected, atol=1e-5, rtol=1e-5, err_msg=name)
    if "tokens" not in record:  # not a generative application
        return
    if record_path in VARIANT_RECORDS and keras.config.backend() != "torch":
        # The per-variant files generate on torch alone: the cached walk is
        # the same code on every backend, and compiling each model's
        # decoding program (about 2 s on XLA) would double this test.
        return
    tokens = model.generate(record["prompts"], record["steps"])
    np.testing.assert_array_equal(np.asarray(tokens), np.asarray(record["tokens"]))
