"""transformers' RoFormer rotates by its stored sinusoid table
(`encoder.embed_positions.weight`); this library computes the standard
one, so a checkpoint whose table differs is refused, not loaded with other
outputs (issue 34, item 6)."""

import numpy as np
import pytest

import keras_attn
from keras_attn.checkpoints.readers import CheckpointError
from tests.checkpoint_files import perturb
from tests.harness import to_numpy
from tests.reference import sinusoidal_positions

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

CONFIG = dict(
    vocab_size=50, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
    intermediate_size=24, max_position_embeddings=20, hidden_dropout_prob=0.0,
    attention_probs_dropout_prob=0.0,
)
IDS = np.array([[2, 9, 14, 31, 7, 3]])


def saved(directory, change=None):
    torch.manual_seed(0)
    model = transformers.RoFormerModel(transformers.RoFormerConfig(**CONFIG)).eval()
    table = model.encoder.embed_positions.weight
    standard = table.detach().clone()
    # Scores large enough for the rotation to matter; the table as made.
    perturb(model, seed=2)
    with torch.no_grad():
        table.copy_(standard)
        if change is not None:
            change(table)
    model.save_pretrained(directory)
    with torch.no_grad():
        return model(torch.tensor(IDS)).last_hidden_state.numpy()


def test_the_stored_table_is_the_standard_one_written_here():
    """The check's reference: Vaswani's table (tests/reference.py) with the
    sines first and the cosines after, as transformers stores it."""
    model = transformers.RoFormerModel(transformers.RoFormerConfig(**CONFIG))
    stored = model.encoder.embed_positions.weight.detach().numpy()
    interleaved = sinusoidal_positions(20, 8)
    expected = np.concatenate([interleaved[:, 0::2], interleaved[:, 1::2]], axis=1)
    np.testing.assert_allclose(stored, expected, atol=1e-6)


def test_a_standard_table_loads_and_matches(tmp_path):
    expected = saved(tmp_path)
    model = keras_attn.build_transformer_model(tmp_path)
    np.testing.assert_allclose(to_numpy(model({"token_ids": IDS, "segment_ids": 0 * IDS})), expected, atol=1e-4)


def test_a_changed_table_is_refused(tmp_path):
    standard = saved(tmp_path / "standard")

    def shift(table):
        table[3:, 0] += 0.2  # the first sine column from position 3 on

    changed = saved(tmp_path / "changed", shift)
    # transformers' outputs do depend on the stored table.
    assert np.abs(changed - standard).max() > 1e-3
    with pytest.raises(CheckpointError) as raised:
        keras_attn.build_transformer_model(tmp_path / "changed")
    message = str(raised.value)
    assert "encoder.embed_positions.weight differs from the standard sinusoids" in message
    assert "0.2" in message and "nothing was loaded" in message
