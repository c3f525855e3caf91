"""RoFormer and RoFormer-v2.

RoFormer: parity with `transformers`' RoFormerModel / RoFormerForMaskedLM on
random weights saved as a Hugging Face directory and, under the names
bert4keras reads, as a Google-format TensorFlow checkpoint (written here
from the Hugging Face weights, independently of the library's tables).

RoFormer-v2: bert4keras's `RoFormerV2` structure re-derived in numpy and
run on the arrays of a Google-format checkpoint written here."""

import json
import os

import numpy as np
import pytest

import keras_attn
from tests.checkpoint_files import google_bert_arrays
from tests.checkpoint_files import google_name
from tests.checkpoint_files import perturb
from tests.checkpoint_files import write_tf_checkpoint
from tests.harness import to_numpy

ROFORMER = dict(
    vocab_size=99, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
    intermediate_size=37, max_position_embeddings=40, hidden_dropout_prob=0.0,
    attention_probs_dropout_prob=0.0, hidden_act="gelu", type_vocab_size=2,
)
# The plain layout, and values rotated too with factorised embeddings.
CASES = {
    "plain": {},
    "rotary_value": {"rotary_value": True, "embedding_size": 24},
}


def inputs():
    rng = np.random.default_rng(0)
    token_ids = rng.integers(5, ROFORMER["vocab_size"], size=(2, 11)).astype("int32")
    token_ids[1, 7:] = 0  # padding
    segment_ids = np.zeros_like(token_ids)
    segment_ids[:, 5:] = 1
    segment_ids[token_ids == 0] = 0
    return token_ids, segment_ids


@pytest.fixture(scope="module", params=sorted(CASES))
def hf_roformer(request, tmp_path_factory):
    """A random `RoFormerForMaskedLM` saved as a Hugging Face directory, its
    options, and its encoder's and head's outputs on `inputs()`."""
    transformers = pytest.importorskip("transformers")
    torch = pytest.importorskip("torch")
    options = CASES[request.param]
    torch.manual_seed(0)
    model = transformers.RoFormerForMaskedLM(transformers.RoFormerConfig(**ROFORMER, **options))
    # The sinusoid table is a parameter in Hugging Face's RoFormer: keep it.
    sinusoids = model.roformer.encoder.embed_positions.weight.detach().clone()
    perturb(model, seed=5).eval()
    with torch.no_grad():
        model.roformer.encoder.embed_positions.weight.copy_(sinusoids)
    directory = tmp_path_factory.mktemp(f"hf_roformer_{request.param}")
    model.save_pretrained(directory)
    token_ids, segment_ids = inputs()
    arguments = dict(
        input_ids=torch.tensor(token_ids, dtype=torch.long),
        token_type_ids=torch.tensor(segment_ids, dtype=torch.long),
        attention_mask=torch.tensor(token_ids != 0, dtype=torch.long),
    )
    with torch.no_grad():
        outputs = {
            "sequence_output": model.roformer(**arguments).last_hidden_state.numpy(),
            "mlm_logits": model(**arguments).logits.numpy(),
        }
    return str(directory), options, outputs


@pytest.fixture(scope="module")
def tf_roformer(hf_roformer, tmp_path_factory):
    """The same weights as bert4keras's RoFormer checkpoints store them:
    a `bert_config.json` and BERT's Google names, no position table."""
    from safetensors.numpy import load_file

    directory, options, _ = hf_roformer
    state = load_file(os.path.join(directory, "model.safetensors"))
    arrays = {"global_step": np.array(10, np.int64)}
    for name, value in state.items():
        if "embed_positions" in name or "decoder" in name:
            continue
        name = name.replace("roformer.", "bert.")
        name = name.replace("bert.embeddings_project.", "bert.encoder.embedding_hidden_mapping_in.")
        if name.endswith(".weight") and value.ndim == 2 and "embeddings." not in name:
            value = value.T  # torch.nn.Linear is (out, in)
        arrays[google_name(name)] = np.ascontiguousarray(value)
    assert not any("position" in name for name in arrays)
    output = tmp_path_factory.mktemp("tf_roformer")
    write_tf_checkpoint(str(output / "bert_model.ckpt"), arrays)
    config = dict(ROFORMER, **options)
    (output / "bert_config.json").write_text(json.dumps(config))
    return str(output / "bert_config.json"), str(output / "bert_model.ckpt")


@pytest.mark.parametrize("source", ["huggingface", "google"])
def test_outputs_equal_transformers_roformer(source, hf_roformer, tf_roformer):
    directory, options, expected = hf_roformer
    if source == "huggingface":
        # `model_type: roformer` selects the variant.
        config, checkpoint, arguments = directory, directory, {}
    else:
        config, checkpoint = tf_roformer
        arguments = {"model": "roformer"}  # bert4keras's spelling
    token_ids, segment_ids = inputs()
    real = token_ids != 0
    batch = {"token_ids": token_ids, "segment_ids": segment_ids}

    encoder = keras_attn.build_transformer_model(config, checkpoint, **arguments)
    assert isinstance(encoder.template, keras_attn.models.Roformer)
    attention = encoder.get_layer("Transformer-0-MultiHeadSelfAttention")
    assert attention.rotary_value == options.get("rotary_value", False)
    np.testing.assert_allclose(
        to_numpy(encoder(batch))[real], expected["sequence_output"][real], atol=1e-4
    )
    mlm = keras_attn.build_transformer_model(config, checkpoint, application="mlm", **arguments)
    np.testing.assert_allclose(
        to_numpy(mlm(batch))[real], expected["mlm_logits"][real], atol=1e-4
    )


def test_rotating_values_changes_the_outputs(hf_roformer):
    """The parity above needs `rotary_value` read from the config: the same
    weights with the other setting give other outputs."""
    directory, options, expected = hf_roformer
    flipped = not options.get("rotary_value", False)
    model = keras_attn.build_transformer_model(directory, directory, rotary_value=flipped)
    token_ids, segment_ids = inputs()
    outputs = to_numpy(model({"token_ids": token_ids, "segment_ids": segment_ids}))
    real = token_ids != 0
    assert np.abs(outputs[real] - expected["sequence_output"][real]).max() > 1e-2


def test_roformer_configs_take_roformer_variants_only(hf_roformer):
    directory = hf_roformer[0]
    with pytest.raises(ValueError, match="use variant='roformer'"):
        keras_attn.build_transformer_model(directory, variant="bert")


def test_rotary_value_needs_rotary_positions():
    with pytest.raises(ValueError, match="rotary_value=True.*position_encoding=None"):
        keras_attn.build_transformer_model(dict(ROFORMER, rotary_value=True), variant="bert")


# RoFormer-v2 -----------------------------------------------------------------

V2 = dict(
    vocab_size=99, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
    intermediate_size=37, max_position_embeddings=40, hidden_dropout_prob=0.0,
    attention_probs_dropout_prob=0.0, hidden_act="relu", type_vocab_size=2,
)
V2_CASES = {
    "mlm": {},
    # Factorised embeddings: encoder only (bert4keras names no
    # `Output-Mapping`, the factorised head's kernel).
    "factorised": {"embedding_size": 24},
}


def v2_arrays(config):
    """What bert4keras's `RoFormerV2.variable_mapping` reads: BERT's Google
    names minus every bias, norm parameter, position table and head."""
    arrays = google_bert_arrays(config, seed=11)
    return {
        name: value
        for name, value in arrays.items()
        if not name.endswith(("bias", "beta", "gamma"))
        and "position_embeddings" not in name
        and not name.startswith(("cls/", "bert/pooler/"))
    }


def v2_reference(arrays, config, token_ids, segment_ids, mlm):
    """bert4keras's RoFormerV2 forward pass, in float64 numpy."""
    heads = config["num_attention_heads"]
    size = config["hidden_size"] // heads
    epsilon = 1e-7  # bert4keras's LayerNormalization: K.epsilon()

    def norm(x):  # zero_mean=False, scale=False, offset=False
        return x / np.sqrt(np.mean(x**2, axis=-1, keepdims=True) + epsilon)

    def rotate(x):  # bert4keras's apply_rotary_position_embeddings
        positions = np.arange(x.shape[1])[:, None]
        angles = positions * 10000.0 ** (-2 * np.arange(size // 2) / size)
        sinusoid = np.stack([np.sin(angles), np.cos(angles)], axis=-1).reshape(len(positions), size)
        cos = np.repeat(sinusoid[:, 1::2], 2, axis=-1)[None, :, None]
        sin = np.repeat(sinusoid[:, ::2], 2, axis=-1)[None, :, None]
        turned = np.stack([-x[..., 1::2], x[..., ::2]], axis=-1).reshape(x.shape)
        return x * cos + turned * sin

    weight = {name: value.astype(np.float64) for name, value in arrays.items()}
    embedding = weight["bert/embeddings/word_embeddings"]
    hidden = norm(embedding[token_ids] + weight["bert/embeddings/token_type_embeddings"][segment_ids])
    if "bert/encoder/embedding_hidden_mapping_in/kernel" in weight:
        hidden = hidden @ weight["bert/encoder/embedding_hidden_mapping_in/kernel"]
    batch, length = token_ids.shape
    key_bias = np.where(token_ids != 0, 0.0, -np.inf)[:, None, None, :]
    for layer in range(config["num_hidden_layers"]):
        prefix = f"bert/encoder/layer_{layer}/"

        def project(name, x):
            return (x @ weight[prefix + name + "/kernel"]).reshape(batch, length, heads, size)

        query = rotate(project("attention/self/query", hidden))
        key = rotate(project("attention/self/key", hidden))
        value = project("attention/self/value", hidden)
        scores = np.einsum("bihd,bjhd->bhij", query, key) / np.sqrt(size) + key_bias
        scores = np.exp(scores - scores.max(axis=-1, keepdims=True))
        probabilities = scores / scores.sum(axis=-1, keepdims=True)
        attended = np.einsum("bhij,bjhd->bihd", probabilities, value).reshape(batch, length, -1)
        hidden = norm(hidden + attended @ weight[prefix + "attention/output/dense/kernel"])
        inner = np.maximum(hidden @ weight[prefix + "intermediate/dense/kernel"], 0.0)
        hidden = norm(hidden + inner @ weight[prefix + "output/dense/kernel"])
    if mlm:
        return hidden @ embedding.T
    return hidden


@pytest.fixture(scope="module", params=sorted(V2_CASES))
def tf_roformer_v2(request, tmp_path_factory):
    config = dict(V2, **V2_CASES[request.param])
    arrays = v2_arrays(config)
    directory = tmp_path_factory.mktemp(f"tf_roformer_v2_{request.param}")
    write_tf_checkpoint(str(directory / "bert_model.ckpt"), arrays)
    (directory / "bert_config.json").write_text(json.dumps(config))
    return request.param, config, arrays, str(directory)


def test_roformer_v2_equals_bert4keras_structure(tf_roformer_v2):
    case, config, arrays, directory = tf_roformer_v2
    application = "mlm" if case == "mlm" else "encoder"
    model = keras_attn.build_transformer_model(
        os.path.join(directory, "bert_config.json"),
        os.path.join(directory, "bert_model.ckpt"),
        model="roformer_v2",  # bert4keras's spelling
        application=application,
    )
    # Nothing but kernels and embeddings: no bias, no norm parameter.
    assert {w.path.rsplit("/", 1)[-1] for w in model.weights} == {"kernel", "embeddings"}
    token_ids, segment_ids = inputs()
    real = token_ids != 0
    expected = v2_reference(arrays, config, token_ids, segment_ids, mlm=application == "mlm")
    outputs = to_numpy(model({"token_ids": token_ids, "segment_ids": segment_ids}))
    np.testing.assert_allclose(outputs[real], expected[real], atol=1e-4)


def test_roformer_v2_refuses_conditional_norms():
    with pytest.raises(ValueError, match="conditional_layer_norm=8"):
        keras_attn.build_transformer_model(V2, variant="roformer_v2", conditional_layer_norm=8)


def test_scale_free_rms_normalization(tmp_path):
    from tests.harness import run_layer_test

    def numpy_reference(layer, inputs):
        x = inputs["x"].astype(np.float64)
        return x / np.sqrt(np.mean(x**2, axis=-1, keepdims=True) + 1e-7)

    run_layer_test(
        keras_attn.layers.RMSNormalization,
        {"scale": False, "epsilon": 1e-7},
        inputs={"x": np.random.default_rng(3).normal(size=(2, 5, 6)).astype("float32")},
        expected_output_shape=(2, 5, 6),
        reference=numpy_reference,
        tmp_path=tmp_path,
    )
    assert keras_attn.layers.RMSNormalization(scale=False).weights == []
