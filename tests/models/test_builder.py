import json
import os

import keras
import numpy as np
import pytest

import keras_attn
from tests.harness import to_numpy

TOLERANCE = 1e-4


def token_batch(vocab_size, pad_id, seed=0, lengths=(9, 6, 3)):
    """Token ids with right padding; ids avoid the pad id."""
    rng = np.random.default_rng(seed)
    length = max(lengths)
    tokens = np.full((len(lengths), length), pad_id, "int32")
    for row, real in enumerate(lengths):
        ids = rng.integers(2, vocab_size, size=real)
        tokens[row, :real] = np.where(ids == pad_id, pad_id + 1, ids)
    segments = np.zeros_like(tokens)
    segments[:, 4:] = 1
    segments[tokens == pad_id] = 0
    return tokens, segments


def hf_outputs(directory, model_class, tokens, segments=None, pad_id=0):
    import torch
    import transformers

    model = getattr(transformers, model_class).from_pretrained(directory).eval()
    base = model.base_model
    with torch.no_grad():
        kwargs = dict(
            input_ids=torch.tensor(tokens, dtype=torch.long),
            attention_mask=torch.tensor(tokens != pad_id, dtype=torch.long),
        )
        if segments is not None:
            kwargs["token_type_ids"] = torch.tensor(segments, dtype=torch.long)
        full = model(**kwargs, output_hidden_states=True)
        encoded = base(**kwargs)
    outputs = {"sequence_output": encoded.last_hidden_state.numpy()}
    if getattr(encoded, "pooler_output", None) is not None:
        outputs["pooled_output"] = encoded.pooler_output.numpy()
    if hasattr(full, "prediction_logits"):
        outputs["mlm_logits"] = full.prediction_logits.numpy()
        outputs["nsp_logits"] = full.seq_relationship_logits.numpy()
    else:
        outputs["mlm_logits"] = full.logits.numpy()
    return outputs


def assert_close_on_real_tokens(actual, expected, tokens, pad_id):
    real = tokens != pad_id
    difference = np.abs(to_numpy(actual)[real] - expected[real]).max()
    assert difference <= TOLERANCE, difference


def test_hf_bert_encoder_matches_transformers(hf_bert_dir):
    tokens, segments = token_batch(99, 0)
    model = keras_attn.build_transformer_model(hf_bert_dir)
    expected = hf_outputs(hf_bert_dir, "BertForPreTraining", tokens, segments)
    output = model({"token_ids": tokens, "segment_ids": segments})
    assert_close_on_real_tokens(output, expected["sequence_output"], tokens, 0)


def test_hf_bert_heads_match_transformers(hf_bert_dir):
    tokens, segments = token_batch(99, 0, seed=1)
    model = keras_attn.build_transformer_model(
        os.path.join(hf_bert_dir, "config.json"),
        os.path.join(hf_bert_dir, "model.safetensors"),
        application="mlm",
        with_nsp=True,
    )
    expected = hf_outputs(hf_bert_dir, "BertForPreTraining", tokens, segments)
    outputs = model({"token_ids": tokens, "segment_ids": segments})
    assert sorted(outputs) == ["mlm_logits", "nsp_logits", "pooled_output"]
    assert_close_on_real_tokens(outputs["mlm_logits"], expected["mlm_logits"], tokens, 0)
    np.testing.assert_allclose(
        to_numpy(outputs["pooled_output"]), expected["pooled_output"], atol=TOLERANCE
    )
    np.testing.assert_allclose(
        to_numpy(outputs["nsp_logits"]), expected["nsp_logits"], atol=TOLERANCE
    )


def test_hf_roberta_matches_transformers(hf_roberta_dir):
    tokens, _ = token_batch(99, 1, seed=2)
    model = keras_attn.build_transformer_model(
        hf_roberta_dir, variant="roberta", application="mlm"
    )
    assert [t.name for t in model.inputs] == ["token_ids"]
    expected = hf_outputs(hf_roberta_dir, "RobertaForMaskedLM", tokens, pad_id=1)
    assert_close_on_real_tokens(model({"token_ids": tokens}), expected["mlm_logits"], tokens, 1)
    encoder = keras_attn.build_transformer_model(hf_roberta_dir, variant="roberta")
    assert_close_on_real_tokens(
        encoder({"token_ids": tokens}), expected["sequence_output"], tokens, 1
    )


def test_roberta_left_padding_matches_transformers(hf_roberta_dir):
    tokens, _ = token_batch(99, 1, seed=3)
    tokens = np.stack([np.roll(row, int((row == 1).sum())) for row in tokens])
    model = keras_attn.build_transformer_model(hf_roberta_dir, variant="roberta")
    expected = hf_outputs(hf_roberta_dir, "RobertaForMaskedLM", tokens, pad_id=1)
    assert_close_on_real_tokens(model({"token_ids": tokens}), expected["sequence_output"], tokens, 1)


def test_google_tf_checkpoint_matches_transformers(hf_bert_dir, tf_bert_checkpoint):
    config, prefix, _ = tf_bert_checkpoint
    tokens, segments = token_batch(99, 0, seed=4)
    model = keras_attn.build_transformer_model(
        config, prefix, application="mlm", with_nsp=True
    )
    expected = hf_outputs(hf_bert_dir, "BertForPreTraining", tokens, segments)
    outputs = model({"token_ids": tokens, "segment_ids": segments})
    assert_close_on_real_tokens(outputs["mlm_logits"], expected["mlm_logits"], tokens, 0)
    np.testing.assert_allclose(
        to_numpy(outputs["pooled_output"]), expected["pooled_output"], atol=TOLERANCE
    )
    np.testing.assert_allclose(
        to_numpy(outputs["nsp_logits"]), expected["nsp_logits"], atol=TOLERANCE
    )


def test_talking_heads_variant_loads_bert_and_starts_as_bert(hf_bert_dir):
    tokens, segments = token_batch(99, 0, seed=5)
    inputs = {"token_ids": tokens, "segment_ids": segments}
    bert = keras_attn.build_transformer_model(hf_bert_dir)
    talking = keras_attn.build_transformer_model(hf_bert_dir, variant="talking_heads")
    attention = talking.get_layer("Transformer-0-MultiHeadSelfAttention")
    assert isinstance(attention, keras_attn.TalkingHeadsAttention)
    np.testing.assert_allclose(to_numpy(talking(inputs)), to_numpy(bert(inputs)), atol=1e-5)
    # The mixing is really in the computation.
    attention.pre_softmax_kernel.assign(np.random.default_rng(0).normal(size=(4, 4)))
    assert np.abs(to_numpy(talking(inputs)) - to_numpy(bert(inputs))).max() > 1e-3


def test_kerple_loads_bert_and_keeps_its_declared_weights_initial(hf_bert_dir, tf_bert_checkpoint):
    """KERPLE's r1/r2 are declared checkpoint-free by `KerpleBias`: loading a
    BERT checkpoint leaves them as built and fills every other weight."""
    config, prefix, _ = tf_bert_checkpoint
    bert = {w.path: to_numpy(w) for w in keras_attn.build_transformer_model(config, prefix).weights}
    fresh = keras_attn.build_transformer_model(config, variant="kerple_log")
    initial = {w.path: to_numpy(w) for w in fresh.get_layer("Position-Bias").weights}
    assert sorted(initial) == ["Position-Bias/r1", "Position-Bias/r2"]
    for source in (prefix, hf_bert_dir):
        # The variant has no position table: BERT's is reported unused.
        with pytest.warns(keras_attn.UnusedWeightsWarning, match="position_embeddings"):
            kerple = keras_attn.build_transformer_model(config, source, variant="kerple_log")
        for weight in kerple.weights:
            if weight.path in initial:
                np.testing.assert_array_equal(to_numpy(weight), initial[weight.path])
            else:
                np.testing.assert_allclose(to_numpy(weight), bert[weight.path], err_msg=weight.path)


def test_an_undeclared_weight_no_table_names_is_an_error(tf_bert_checkpoint):
    """The same KERPLE bias without its declaration: r1/r2 are then weights
    the checkpoint format has no name for, and nothing is loaded."""
    config, prefix, _ = tf_bert_checkpoint

    class UndeclaredKerpleBias(keras_attn.layers.KerpleBias):
        checkpoint_free_weights = ()

    @keras_attn.register_variant("test_undeclared_kerple")
    class UndeclaredKerple(keras_attn.Transformer):
        def make_position_embedding(self):
            return None

        def make_position_bias(self):
            return UndeclaredKerpleBias(self.config.num_heads, name="Position-Bias")

    with pytest.raises(keras_attn.CheckpointError) as raised:
        keras_attn.build_transformer_model(config, prefix, variant="test_undeclared_kerple")
    message = str(raised.value)
    assert "has no name for (2)" in message
    assert "Position-Bias/r1" in message and "Position-Bias/r2" in message


# RoBERTa+ against a numpy forward pass ------------------------------------------

ROBERTA_PLUS = dict(
    vocab_size=50,
    hidden_size=24,
    num_hidden_layers=2,
    num_attention_heads=3,
    intermediate_size=40,
    max_position_embeddings=32,
    type_vocab_size=2,
    hidden_act="gelu",
    hidden_dropout_prob=0.1,
    attention_probs_dropout_prob=0.1,
    embedding_size=12,
    attention_key_size=32,  # 4 x head size (8)
)


def roberta_plus_arrays(seed=0):
    config = ROBERTA_PLUS
    rng = np.random.default_rng(seed)
    hidden, emb = config["hidden_size"], config["embedding_size"]
    heads, key_size = config["num_attention_heads"], config["attention_key_size"]
    head_size = hidden // heads

    def rand(*shape):
        return rng.normal(scale=0.2, size=shape).astype("float32")

    arrays = {
        "bert/embeddings/word_embeddings": rand(config["vocab_size"], emb),
        "bert/embeddings/token_type_embeddings": rand(2, emb),
        "bert/embeddings/position_embeddings": rand(config["max_position_embeddings"], emb),
        "bert/embeddings/LayerNorm/gamma": 1 + rand(emb),
        "bert/embeddings/LayerNorm/beta": rand(emb),
        "bert/encoder/embedding_hidden_mapping_in/kernel": rand(emb, hidden),
        "bert/encoder/embedding_hidden_mapping_in/bias": rand(hidden),
        "cls/predictions/transform/dense/kernel": rand(hidden, emb),
        "cls/predictions/transform/dense/bias": rand(emb),
        "cls/predictions/transform/LayerNorm/gamma": 1 + rand(emb),
        "cls/predictions/transform/LayerNorm/beta": rand(emb),
        "cls/predictions/output_bias": rand(config["vocab_size"]),
    }
    for layer in range(config["num_hidden_layers"]):
        p = f"bert/encoder/layer_{layer}/"
        for part, width in (("query", heads * key_size), ("key", heads * key_size), ("value", heads * head_size)):
            arrays[p + f"attention/self/{part}/kernel"] = rand(hidden, width)
            arrays[p + f"attention/self/{part}/bias"] = rand(width)
        arrays[p + "attention/output/dense/kernel"] = rand(heads * head_size, hidden)
        arrays[p + "attention/output/dense/bias"] = rand(hidden)
        arrays[p + "intermediate/dense/kernel"] = rand(hidden, config["intermediate_size"])
        arrays[p + "intermediate/dense/bias"] = rand(config["intermediate_size"])
        arrays[p + "output/dense/kernel"] = rand(config["intermediate_size"], hidden)
        arrays[p + "output/dense/bias"] = rand(hidden)
        for norm in ("attention/output/LayerNorm", "output/LayerNorm"):
            arrays[p + norm + "/gamma"] = 1 + rand(hidden)
            arrays[p + norm + "/beta"] = rand(hidden)
    return arrays


def numpy_roberta_plus(arrays, tokens, segments, pad_id=0):
    """RoBERTa+ forward pass in float64 numpy, from the paper's formulas."""
    from scipy.special import erf

    config = ROBERTA_PLUS
    a = {k: v.astype(np.float64) for k, v in arrays.items()}
    heads, key_size = config["num_attention_heads"], config["attention_key_size"]
    head_size = config["hidden_size"] // heads

    def layer_norm(x, prefix, eps=1e-12):
        mean = x.mean(-1, keepdims=True)
        var = ((x - mean) ** 2).mean(-1, keepdims=True)
        return (x - mean) / np.sqrt(var + eps) * a[prefix + "/gamma"] + a[prefix + "/beta"]

    def gelu(x):
        return 0.5 * x * (1 + erf(x / np.sqrt(2)))

    def dense(x, prefix):
        return x @ a[prefix + "/kernel"] + a[prefix + "/bias"]

    length = tokens.shape[1]
    x = (
        a["bert/embeddings/word_embeddings"][tokens]
        + a["bert/embeddings/token_type_embeddings"][segments]
        + a["bert/embeddings/position_embeddings"][:length]
    )
    x = layer_norm(x, "bert/embeddings/LayerNorm")
    x = dense(x, "bert/encoder/embedding_hidden_mapping_in")
    keep = tokens != pad_id
    for layer in range(config["num_hidden_layers"]):
        p = f"bert/encoder/layer_{layer}/"
        batch = x.shape[0]
        q = dense(x, p + "attention/self/query").reshape(batch, length, heads, key_size)
        k = dense(x, p + "attention/self/key").reshape(batch, length, heads, key_size)
        v = dense(x, p + "attention/self/value").reshape(batch, length, heads, head_size)
        scores = np.einsum("bqhd,bkhd->bhqk", q, k) / np.sqrt(key_size)
        scores = np.where(keep[:, None, None, :], scores, -np.inf)
        scores = np.exp(scores - scores.max(-1, keepdims=True))
        probabilities = scores / scores.sum(-1, keepdims=True)
        attended = np.einsum("bhqk,bkhd->bqhd", probabilities, v).reshape(batch, length, -1)
        x = layer_norm(x + dense(attended, p + "attention/output/dense"), p + "attention/output/LayerNorm")
        hidden = gelu(dense(x, p + "intermediate/dense"))
        x = layer_norm(x + dense(hidden, p + "output/dense"), p + "output/LayerNorm")
    sequence = x
    transformed = layer_norm(
        gelu(dense(x, "cls/predictions/transform/dense")), "cls/predictions/transform/LayerNorm"
    )
    logits = transformed @ a["bert/embeddings/word_embeddings"].T + a["cls/predictions/output_bias"]
    return sequence, logits


@pytest.fixture(scope="module")
def roberta_plus_checkpoint(tmp_path_factory, tf_checkpoint_writer):
    directory = tmp_path_factory.mktemp("roberta_plus")
    arrays = roberta_plus_arrays()
    prefix = tf_checkpoint_writer(str(directory / "bert_model.ckpt"), arrays)
    config = str(directory / "bert_config.json")
    with open(config, "w") as file:
        json.dump(ROBERTA_PLUS, file)
    return config, prefix, arrays


def test_roberta_plus_matches_numpy_forward_pass(roberta_plus_checkpoint):
    config, prefix, arrays = roberta_plus_checkpoint
    tokens, segments = token_batch(50, 0, seed=6)
    model = keras_attn.build_transformer_model(
        config, prefix, variant="roberta+", application="mlm"
    )
    attention = model.get_layer("Transformer-1-MultiHeadSelfAttention")
    assert attention.key_size == 32 and attention.head_size == 8
    assert tuple(model.get_layer("Embedding-Token").embeddings.shape) == (50, 12)
    expected_sequence, expected_logits = numpy_roberta_plus(arrays, tokens, segments)
    logits = model({"token_ids": tokens, "segment_ids": segments})
    assert_close_on_real_tokens(logits, expected_logits, tokens, 0)
    encoder = keras_attn.build_transformer_model(config, prefix, variant="roberta+")
    assert_close_on_real_tokens(
        encoder({"token_ids": tokens, "segment_ids": segments}), expected_sequence, tokens, 0
    )


def test_roberta_plus_requires_its_fields(hf_bert_dir):
    with pytest.raises(ValueError, match="roberta\\+"):
        keras_attn.build_transformer_model(hf_bert_dir, variant="roberta+")


# Applications and masks ----------------------------------------------------------


def small_config(**changes):
    config = dict(
        vocab_size=30, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
        intermediate_size=20, max_position_embeddings=16,
        hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
        # Large random weights, so that a perturbation that reaches a position
        # changes it clearly.
        initializer_range=0.5,
    )
    config.update(changes)
    return config


def test_lm_application_is_causal_by_perturbation():
    model = keras_attn.build_transformer_model(small_config(), application="lm")
    tokens = np.array([[3, 7, 5, 9, 4, 8, 6]], "int32")
    segments = np.zeros_like(tokens)
    base = to_numpy(model({"token_ids": tokens, "segment_ids": segments}))
    for position in range(1, 7):
        changed = tokens.copy()
        changed[0, position] = 11
        logits = to_numpy(model({"token_ids": changed, "segment_ids": segments}))
        np.testing.assert_allclose(logits[0, :position], base[0, :position], atol=1e-5)
        assert np.abs(logits[0, position] - base[0, position]).max() > 1e-4


def test_unilm_mask_by_perturbation():
    model = keras_attn.build_transformer_model(small_config(), application="unilm")
    tokens = np.array([[3, 7, 5, 9, 4, 8, 6]], "int32")
    segments = np.array([[0, 0, 0, 1, 1, 1, 1]], "int32")
    inputs = {"token_ids": tokens, "segment_ids": segments}
    base = to_numpy(model(inputs))
    # A change in the source (segment 0) reaches every position, earlier
    # source positions included: the source is bidirectional.
    changed = dict(inputs, token_ids=tokens.copy())
    changed["token_ids"][0, 2] = 11
    logits = to_numpy(model(changed))
    assert np.abs(logits[0, 0] - base[0, 0]).max() > 1e-4
    assert np.abs(logits[0, 6] - base[0, 6]).max() > 1e-4
    # A change at target position 5 reaches neither the source nor earlier targets.
    changed = dict(inputs, token_ids=tokens.copy())
    changed["token_ids"][0, 5] = 11
    logits = to_numpy(model(changed))
    np.testing.assert_allclose(logits[0, :5], base[0, :5], atol=1e-5)
    assert np.abs(logits[0, 6] - base[0, 6]).max() > 1e-4


def test_explicit_padding_mask_equals_pad_id_padding():
    config = small_config()
    derived = keras_attn.build_transformer_model(config)
    explicit = keras_attn.build_transformer_model(config, padding_mask_input=True)
    explicit.set_weights(derived.get_weights())
    tokens = np.array([[3, 7, 5, 0, 0]], "int32")
    segments = np.zeros_like(tokens)
    expected = to_numpy(derived({"token_ids": tokens, "segment_ids": segments}))
    # With an explicit mask the padded ids no longer matter.
    garbage = tokens.copy()
    garbage[0, 3:] = [9, 4]
    output = explicit(
        {"token_ids": garbage, "segment_ids": segments, "padding_mask": (tokens != 0).astype("int32")}
    )
    np.testing.assert_allclose(to_numpy(output)[0, :3], expected[0, :3], atol=1e-5)
    unmasked = to_numpy(derived({"token_ids": garbage, "segment_ids": segments}))
    assert np.abs(unmasked[0, :3] - expected[0, :3]).max() > 1e-4


def test_keep_tokens_selects_vocabulary_rows(tf_bert_checkpoint):
    config, prefix, _ = tf_bert_checkpoint
    keep = [0, 1, 5, 17, 42, 98, 3]
    full = keras_attn.build_transformer_model(config, prefix, application="mlm")
    trimmed = keras_attn.build_transformer_model(
        config, prefix, application="mlm", keep_tokens=keep
    )
    trimmed_ids = np.array([[2, 3, 4, 6, 5, 0]], "int32")
    full_ids = np.asarray(keep)[trimmed_ids].astype("int32")
    segments = np.zeros_like(trimmed_ids)
    full_logits = to_numpy(full({"token_ids": full_ids, "segment_ids": segments}))
    trimmed_logits = to_numpy(trimmed({"token_ids": trimmed_ids, "segment_ids": segments}))
    assert trimmed_logits.shape[-1] == len(keep)
    np.testing.assert_allclose(trimmed_logits[0, :5], full_logits[0, :5][:, keep], atol=1e-5)


def test_layer_names_are_stable(hf_bert_dir):
    model = keras_attn.build_transformer_model(hf_bert_dir, application="mlm", with_pool=True)
    names = {layer.name for layer in model.layers}
    for expected in (
        "Embedding-Token", "Embedding-Segment", "Embedding-Position", "Embedding-Norm",
        "Transformer-0-MultiHeadSelfAttention", "Transformer-1-FeedForward-Norm",
        "Pooler-Dense", "MLM-Dense", "MLM-Norm", "MLM-Bias",
    ):
        assert expected in names, expected


def test_weights_h5_round_trip(hf_bert_dir, tmp_path):
    tokens, segments = token_batch(99, 0, seed=7)
    inputs = {"token_ids": tokens, "segment_ids": segments}
    model = keras_attn.build_transformer_model(hf_bert_dir, with_pool=True)
    path = str(tmp_path / "bert.weights.h5")
    model.save_weights(path)
    restored = keras_attn.build_transformer_model(
        os.path.join(hf_bert_dir, "config.json"), path, with_pool=True
    )
    for key, value in model(inputs).items():
        np.testing.assert_array_equal(to_numpy(restored(inputs)[key]), to_numpy(value))


def test_keras_file_round_trip(hf_bert_dir, tmp_path):
    tokens, segments = token_batch(99, 0, seed=8)
    inputs = {"token_ids": tokens, "segment_ids": segments}
    model = keras_attn.build_transformer_model(hf_bert_dir, application="mlm")
    path = str(tmp_path / "bert.keras")
    model.save(path)
    restored = keras.models.load_model(path)
    np.testing.assert_array_equal(to_numpy(restored(inputs)), to_numpy(model(inputs)))


# Errors --------------------------------------------------------------------------


def test_unknown_override_is_an_error(hf_bert_dir):
    with pytest.raises(ValueError, match="dropout_rat"):
        keras_attn.build_transformer_model(hf_bert_dir, dropout_rat=0.0)


def test_overrides_replace_config_fields(hf_bert_dir):
    model = keras_attn.build_transformer_model(
        os.path.join(hf_bert_dir, "config.json"), dropout_rate=0.3, hidden_act="relu"
    )
    assert model.get_layer("Embedding-Dropout").rate == 0.3
    assert model.get_layer("Transformer-0-FeedForward").activation == "relu"


def test_unknown_variant_and_application_are_errors(hf_bert_dir):
    with pytest.raises(ValueError, match="variant"):
        keras_attn.build_transformer_model(hf_bert_dir, variant="bart")
    with pytest.raises(ValueError, match="application"):
        keras_attn.build_transformer_model(hf_bert_dir, application="seq2seq")


def test_missing_variables_are_listed_and_nothing_is_loaded(tf_bert_checkpoint, tf_checkpoint_writer, tmp_path):
    config, _, arrays = tf_bert_checkpoint
    broken = {k: v for k, v in arrays.items() if "layer_1/attention/self/key" not in k}
    broken["bert/encoder/layer_1/attention/self/kee/kernel"] = arrays[
        "bert/encoder/layer_1/attention/self/key/kernel"
    ]
    prefix = tf_checkpoint_writer(str(tmp_path / "broken.ckpt"), broken)
    model = keras_attn.build_transformer_model(config)
    before = [to_numpy(w).copy() for w in model.weights]
    with pytest.raises(ValueError) as raised:
        keras_attn.load_checkpoint(model, prefix)
    message = str(raised.value)
    assert "Transformer-1-MultiHeadSelfAttention/key_dense/kernel" in message
    assert "Transformer-1-MultiHeadSelfAttention/key_dense/bias" in message
    assert "bert/encoder/layer_1/attention/self/kee/kernel" in message  # unused
    assert prefix in message
    assert "global_step" not in message
    for old, new in zip(before, model.weights):
        np.testing.assert_array_equal(old, to_numpy(new))


def test_config_weights_disagreement_names_shapes(tf_bert_checkpoint):
    config, prefix, _ = tf_bert_checkpoint
    with pytest.raises(ValueError) as raised:
        keras_attn.build_transformer_model(config, prefix, intermediate_size=36)
    message = str(raised.value)
    assert "Transformer-0-FeedForward/intermediate_dense/kernel" in message
    assert "(32, 36)" in message and "(32, 37)" in message


def test_corrupt_checkpoint_is_reported(hf_bert_dir, tmp_path):
    source = os.path.join(hf_bert_dir, "model.safetensors")
    truncated = str(tmp_path / "model.safetensors")
    with open(source, "rb") as file:
        data = file.read()
    with open(truncated, "wb") as file:
        file.write(data[: len(data) // 2])
    with pytest.raises(ValueError, match="model.safetensors"):
        keras_attn.build_transformer_model(
            os.path.join(hf_bert_dir, "config.json"), truncated
        )


def test_sequence_longer_than_max_position_is_an_error(hf_bert_dir):
    model = keras_attn.build_transformer_model(hf_bert_dir)
    tokens = np.ones((1, 41), "int32")
    with pytest.raises(ValueError, match="41"):
        model({"token_ids": tokens, "segment_ids": np.zeros_like(tokens)})


def test_config_directory_without_weights_is_an_error(tmp_path):
    with open(tmp_path / "config.json", "w") as file:
        json.dump(small_config(), file)
    with pytest.raises(FileNotFoundError, match=str(tmp_path)):
        keras_attn.build_transformer_model(str(tmp_path))


def test_pytorch_bin_loads_like_safetensors(hf_bert_dir, tmp_path):
    torch = pytest.importorskip("torch")
    from safetensors.numpy import load_file

    state = load_file(os.path.join(hf_bert_dir, "model.safetensors"))
    torch.save({k: torch.tensor(v) for k, v in state.items()}, str(tmp_path / "pytorch_model.bin"))
    with open(os.path.join(hf_bert_dir, "config.json")) as source:
        (tmp_path / "config.json").write_text(source.read())
    tokens, segments = token_batch(99, 0, seed=9)
    inputs = {"token_ids": tokens, "segment_ids": segments}
    from_bin = keras_attn.build_transformer_model(str(tmp_path), application="mlm")
    from_safetensors = keras_attn.build_transformer_model(hf_bert_dir, application="mlm")
    np.testing.assert_array_equal(to_numpy(from_bin(inputs)), to_numpy(from_safetensors(inputs)))
