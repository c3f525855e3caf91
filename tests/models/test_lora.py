"""LoRA on the builder's models (`keras_attn.lora`): only the adapters (and a
head added afterwards) train, adapters start as a no-op, save and load alone,
merge into the kernels, and survive `.keras` saving."""

import os

import keras
import numpy as np
import pytest

import keras_attn
from keras_attn import lora
from tests.harness import supports_jit
from tests.harness import to_numpy
from tests.models.test_variants import build
from tests.models.test_variants import inputs_for

RANK = 4


def randomize_adapters(model, seed=0):
    """Adapters start as a no-op (B = 0); give them values that matter."""
    rng = np.random.default_rng(seed)
    for variable in model.variables:
        if "lora_kernel" in variable.path:
            variable.assign(rng.normal(scale=0.3, size=variable.shape).astype("float32"))


def adapter_variables(model):
    return [v for v in model.variables if "lora_kernel" in v.path]


def with_head(backbone):
    pooled = backbone.output[:, 0]
    logits = keras.layers.Dense(3, name="head")(pooled)
    return keras.Model(backbone.input, logits)


# Widths and attentions that differ: plain, decoupled key width, talking
# heads (mixing weights must stay frozen), T-TA (keys from the embeddings),
# ALiBi (a position bias, no position table; feed-forward adapted too).
@pytest.mark.parametrize(
    "variant, feed_forward",
    [("bert", False), ("roberta+", False), ("talking_heads", False), ("tta", False), ("alibi", True)],
)
def test_only_adapters_are_trainable(variant, feed_forward):
    backbone = build(variant, "encoder")
    inputs = inputs_for(backbone)
    expected = to_numpy(backbone(inputs))
    base_count = backbone.count_params()

    added = lora.enable_lora(backbone, RANK, feed_forward=feed_forward)

    # B is zero-initialised: the adapted model computes the base model.
    np.testing.assert_array_equal(to_numpy(backbone(inputs)), expected)
    trainable = backbone.trainable_variables
    assert trainable and all("lora_kernel" in v.path for v in trainable)
    assert len(trainable) == len(adapter_variables(backbone))
    assert added == sum(int(np.prod(v.shape)) for v in trainable)
    assert backbone.count_params() == base_count + added
    # Independent count: each adapted (d_in x d_out) kernel adds rank*(d_in+d_out).
    hidden = 16
    key_width = {"roberta+": 2 * 12}.get(variant, hidden)
    per_layer = RANK * (2 * (hidden + key_width) + 2 * (hidden + hidden))
    if feed_forward:
        per_layer += 2 * RANK * (hidden + 24)
    assert added == per_layer  # one layer


def test_a_fit_step_changes_only_adapters_and_head():
    # Talking heads: its mixing weights are not projections and stay frozen.
    backbone = build("talking_heads", "encoder")
    inputs = inputs_for(backbone)
    lora.enable_lora(backbone, RANK, feed_forward=True)
    model = with_head(backbone)
    model.compile(
        optimizer=keras.optimizers.SGD(learning_rate=0.5),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        jit_compile=supports_jit(),
    )
    before = {v.path: to_numpy(v).copy() for v in model.variables}
    model.fit(inputs, np.array([0, 2]), batch_size=2, epochs=1, verbose=0)
    changed = {v.path for v in model.variables if not np.array_equal(before[v.path], to_numpy(v))}
    frozen_changed = [p for p in changed if "lora_kernel" not in p and not p.startswith("head/")]
    assert not frozen_changed
    assert any("FeedForward/output_dense/lora_kernel_b" in p for p in changed)
    assert any("MultiHeadSelfAttention/query_dense/lora_kernel_b" in p for p in changed)
    assert any(p.startswith("head/") for p in changed)


def test_saved_adapters_reproduce_outputs_in_a_fresh_model(tmp_path):
    model = build("bert", "encoder")
    base_weights = model.get_weights()
    inputs = inputs_for(model)
    lora.enable_lora(model, RANK, feed_forward=True, alpha=8)
    randomize_adapters(model)
    expected = to_numpy(model(inputs))
    path = str(tmp_path / "adapters.npz")
    lora.save_lora_weights(model, path)

    fresh = build("bert", "encoder")
    fresh.set_weights(base_weights)
    lora.enable_lora(fresh, RANK, feed_forward=True, alpha=8)
    assert np.abs(to_numpy(fresh(inputs)) - expected).max() > 1e-3  # adapters matter
    lora.load_lora_weights(fresh, path)
    np.testing.assert_allclose(to_numpy(fresh(inputs)), expected, atol=1e-6)

    # The file holds the adapters and their scales only.
    with np.load(path) as archive:
        assert all(key.rsplit("/", 1)[1] in ("lora_kernel_a", "lora_kernel_b", "lora_alpha")
                   for key in archive.files)
        assert len(archive.files) == 3 * 6  # 4 attention + 2 feed-forward projections


def test_adapter_loading_errors_name_the_variable_and_file(tmp_path):
    model = build("bert", "encoder")
    lora.enable_lora(model, RANK, feed_forward=True)
    path = str(tmp_path / "adapters.npz")
    lora.save_lora_weights(model, path)

    attention_only = build("bert", "encoder")
    lora.enable_lora(attention_only, RANK)
    with pytest.raises(ValueError, match=r"adapters.npz.*Transformer-0-FeedForward/\w+_dense/lora_kernel_a.*does not have"):
        lora.load_lora_weights(attention_only, path)

    other_rank = build("bert", "encoder")
    lora.enable_lora(other_rank, 2, feed_forward=True)
    with pytest.raises(ValueError, match=r"Transformer-0-\w+/\w+_dense/lora_kernel_a' has shape \(16, 4\) in .*adapters.npz.*\(16, 2\)"):
        lora.load_lora_weights(other_rank, path)

    other_alpha = build("bert", "encoder")
    lora.enable_lora(other_alpha, RANK, feed_forward=True, alpha=16)
    with pytest.raises(ValueError, match="lora_alpha 4.0 in .*adapters.npz.*16"):
        lora.load_lora_weights(other_alpha, path)

    with_feed_forward = build("bert", "encoder")
    lora.enable_lora(with_feed_forward, RANK, feed_forward=True)
    attention_path = str(tmp_path / "attention.npz")
    lora.save_lora_weights(attention_only, attention_path)
    with pytest.raises(ValueError, match=r"attention.npz' has no adapter variable 'Transformer-0-FeedForward"):
        lora.load_lora_weights(with_feed_forward, attention_path)

    plain = build("bert", "encoder")
    with pytest.raises(ValueError, match="no LoRA adapters.*enable_lora"):
        lora.load_lora_weights(plain, path)
    with pytest.raises(FileNotFoundError, match="missing.npz"):
        lora.load_lora_weights(model, str(tmp_path / "missing.npz"))
    with pytest.raises(ValueError, match="already has LoRA adapters of rank 4; received rank=2"):
        lora.enable_lora(model, 2)


def test_load_accepts_the_path_save_accepted(tmp_path):
    """`save_lora_weights(m, "adapters")` writes `adapters.npz` (NumPy's
    rule); `load_lora_weights(m, "adapters")` reads it back."""
    model = build("bert", "encoder")
    lora.enable_lora(model, RANK)
    randomize_adapters(model)
    expected = to_numpy(model(inputs_for(model)))
    written = lora.save_lora_weights(model, str(tmp_path / "adapters"))
    randomize_adapters(model, seed=1)
    assert np.abs(to_numpy(model(inputs_for(model))) - expected).max() > 1e-3
    lora.load_lora_weights(model, str(tmp_path / "adapters"))
    np.testing.assert_allclose(to_numpy(model(inputs_for(model))), expected, atol=1e-6)
    assert written == str(tmp_path / "adapters.npz") and os.path.isfile(written)
    with pytest.raises(FileNotFoundError, match=r"'.*other' or '.*other.npz'"):
        lora.load_lora_weights(model, str(tmp_path / "other"))


def test_unreadable_adapter_files_name_the_file_and_the_problem(tmp_path):
    model = build("bert", "encoder")
    lora.enable_lora(model, RANK)
    path = str(tmp_path / "adapters.npz")
    lora.save_lora_weights(model, path)
    with open(path, "rb") as file:
        data = file.read()

    truncated = tmp_path / "truncated.npz"
    truncated.write_bytes(data[: len(data) // 2])
    with pytest.raises(ValueError, match=r"truncated.npz' is not a complete `.npz` archive"):
        lora.load_lora_weights(model, str(truncated))

    weights = str(tmp_path / "model.weights.h5")
    model.save_weights(weights)
    with pytest.raises(ValueError, match=r"model.weights.h5' is an HDF5 file.*load_weights"):
        lora.load_lora_weights(model, weights)

    # Every variable, but no scales.
    with np.load(path) as archive:
        without_alpha = {k: archive[k] for k in archive.files if not k.endswith("/lora_alpha")}
    no_alpha = str(tmp_path / "no_alpha.npz")
    np.savez(no_alpha, **without_alpha)
    with pytest.raises(ValueError, match=r"no_alpha.npz' has no entry 'Transformer-0-\S+/lora_alpha'"):
        lora.load_lora_weights(model, no_alpha)


def test_merge_folds_adapters_into_kernels():
    model = build("roberta+", "mlm")
    inputs = inputs_for(model)
    lora.enable_lora(model, RANK, feed_forward=True, alpha=2)
    randomize_adapters(model)
    expected = to_numpy(model(inputs))
    query = model.get_layer("Transformer-0-MultiHeadSelfAttention").query_dense
    a, b = to_numpy(query.lora_kernel_a), to_numpy(query.lora_kernel_b)
    reference_kernel = to_numpy(query._kernel) + (2 / RANK) * a @ b

    assert lora.merge_lora(model) == 6
    np.testing.assert_allclose(to_numpy(model(inputs)), expected, atol=1e-5)
    np.testing.assert_allclose(to_numpy(query.kernel), reference_kernel, atol=1e-6)
    assert not adapter_variables(model)
    assert "lora_rank" not in query.get_config()
    with pytest.raises(ValueError, match="no LoRA adapters to merge"):
        lora.merge_lora(model)


def test_lora_model_keras_round_trip(tmp_path):
    """Keras saves an adapted `Dense` with its adapters merged into the
    kernel: the reloaded model computes the same and has no adapters."""
    model = build("talking_heads", "encoder")
    inputs = inputs_for(model)
    lora.enable_lora(model, RANK)
    randomize_adapters(model)
    expected = to_numpy(model(inputs))
    path = str(tmp_path / "model.keras")
    model.save(path)
    loaded = keras.models.load_model(path)
    assert isinstance(loaded, keras_attn.TransformerModel)
    np.testing.assert_allclose(to_numpy(loaded(inputs)), expected, atol=1e-5)
    assert not adapter_variables(loaded)


def test_a_bad_alpha_is_refused_by_name_before_any_adapter():
    model = build("bert", "encoder")
    for alpha, error, shown in (
        (float("nan"), ValueError, "nan"),  # every output NaN
        (float("inf"), ValueError, "inf"),
        (0, ValueError, "0"),  # inert adapters
        (-8.0, ValueError, "-8.0"),
        ("8", TypeError, r"'8' \(str\)"),  # a raw TypeError at the first call
        (True, TypeError, r"True \(bool\)"),
        ([8], TypeError, r"\[8\] \(list\)"),
    ):
        with pytest.raises(error, match=r"enable_lora: `alpha` must be a finite positive "
                           rf"real number.*received {shown}"):
            lora.enable_lora(model, RANK, alpha=alpha)
    assert not adapter_variables(model)
    assert lora.enable_lora(model, RANK, alpha=np.float32(0.5)) > 0
