"""T5, T5 v1.1 and mT5 against transformers: logits with padding, the
encoder alone, greedy and beam generation, Mesh TensorFlow names, and
teacher-forced training."""

import json

import keras
import numpy as np
import pytest

import keras_attn
from tests.checkpoint_files import perturb
from tests.checkpoint_files import write_tf_checkpoint
from tests.harness import to_numpy

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
safetensors_torch = pytest.importorskip("safetensors.torch")

SMALL = dict(
    vocab_size=64, d_model=16, d_kv=6, d_ff=24, num_layers=2, num_heads=2,
    relative_attention_num_buckets=8, relative_attention_max_distance=12,
    dropout_rate=0.0, decoder_start_token_id=0, pad_token_id=0, eos_token_id=1,
)
# The first source is longer than `relative_attention_max_distance`, so the
# logarithmic buckets and the last one are used; the second is padded.
SOURCES = np.array([list(range(3, 23)), [8, 9, 10, 11, 1] + [0] * 15])
TARGETS = np.array([[0, 4, 5, 6, 7], [0, 9, 10, 11, 12]])


def hf_model(kind, seed):
    torch.manual_seed(seed)
    if kind == "t5":
        model = transformers.T5ForConditionalGeneration(
            transformers.T5Config(feed_forward_proj="relu", **SMALL)
        )
    else:
        model = transformers.MT5ForConditionalGeneration(
            transformers.MT5Config(feed_forward_proj="gated-gelu", **SMALL)
        )
    return perturb(model, seed=seed + 1).eval()


@pytest.fixture(scope="module", params=["t5", "mt5"])
def pair(request, tmp_path_factory):
    """A random transformers model saved locally and ours built from it."""
    model = hf_model(request.param, seed=3)
    directory = tmp_path_factory.mktemp(request.param)
    model.save_pretrained(directory)
    return model, keras_attn.build_transformer_model(directory), directory


# Logits are compared relative to their scale: float32 rounding grows with
# the logits' size (mT5's reach 14 here, 27 in larger configs, where
# TensorFlow's differ from torch's by 1e-4), so the bound is a fraction of
# the largest |logit|, with a floor for logits near 0.
LOGIT_TOLERANCE = 1e-5


def assert_logits_close(actual, expected):
    bound = LOGIT_TOLERANCE * max(1.0, float(np.abs(expected).max()))
    difference = float(np.abs(np.asarray(actual) - expected).max())
    assert difference <= bound, f"largest difference {difference:.3g} > {bound:.3g}"


def test_the_logit_tolerance_can_fail():
    expected = np.array([[0.5, -14.0]])
    assert_logits_close(expected + 1e-4, expected)
    with pytest.raises(AssertionError, match="largest difference"):
        assert_logits_close(expected + 2e-4, expected)


def hf_logits(model, sources, targets):
    with torch.no_grad():
        return model(
            input_ids=torch.tensor(sources),
            attention_mask=torch.tensor((sources != 0).astype("int64")),
            decoder_input_ids=torch.tensor(targets),
        ).logits.numpy()


def test_variant_and_inputs(pair):
    hf, ours, _ = pair
    expected = "T5" if isinstance(hf, transformers.T5ForConditionalGeneration) else "T5V11"
    assert type(ours.template).__name__ == expected
    assert sorted(ours.input_contract.names) == ["decoder_token_ids", "encoder_token_ids"]


def test_logits_equal_transformers_with_padding(pair):
    hf, ours, _ = pair
    logits = to_numpy(ours({"encoder_token_ids": SOURCES, "decoder_token_ids": TARGETS}))
    assert_logits_close(logits, hf_logits(hf, SOURCES, TARGETS))


def test_an_untied_v11_head_is_read_from_lm_head(tmp_path):
    """Checkpoints saved before transformers 5 keep v1.1's own `lm_head`
    (and `tie_word_embeddings: false`): the logits are the decoder's output
    times that matrix, unscaled."""
    hf = hf_model("mt5", seed=5)
    state = {name: tensor.clone() for name, tensor in hf.state_dict().items()}
    head = torch.randn(SMALL["vocab_size"], SMALL["d_model"], generator=torch.Generator().manual_seed(9))
    state["lm_head.weight"] = head
    safetensors_torch.save_file(state, str(tmp_path / "model.safetensors"))
    config = hf.config.to_dict()
    config.update(model_type="t5", tie_word_embeddings=False, feed_forward_proj="gated-gelu")
    (tmp_path / "config.json").write_text(json.dumps(config))
    ours = keras_attn.build_transformer_model(tmp_path)
    assert type(ours.template).__name__ == "T5V11"
    with torch.no_grad():
        decoder_output = hf(
            input_ids=torch.tensor(SOURCES),
            attention_mask=torch.tensor((SOURCES != 0).astype("int64")),
            decoder_input_ids=torch.tensor(TARGETS),
            output_hidden_states=True,
        ).decoder_hidden_states[-1].numpy()
    expected = decoder_output @ head.numpy().T
    logits = to_numpy(ours({"encoder_token_ids": SOURCES, "decoder_token_ids": TARGETS}))
    assert_logits_close(logits, expected)


def test_t5_encoder_equals_transformers_encoder(pair):
    hf, _, directory = pair
    encoder = keras_attn.build_transformer_model(directory, variant="t5_encoder")
    with torch.no_grad():
        expected = hf.encoder(
            input_ids=torch.tensor(SOURCES),
            attention_mask=torch.tensor((SOURCES != 0).astype("int64")),
        ).last_hidden_state.numpy()
    real = SOURCES != 0
    np.testing.assert_allclose(to_numpy(encoder(SOURCES))[real], expected[real], atol=1e-4)


PROMPTS = [[5, 17, 3, 44, 9, 1], [7, 12, 1], list(range(20, 40)) + [1]]


def test_greedy_generation_equals_transformers_generate(pair):
    hf, ours, _ = pair
    tokens = ours.generate(PROMPTS, 7)
    for prompt, row in zip(PROMPTS, tokens):
        with torch.no_grad():
            expected = hf.generate(
                torch.tensor([prompt]), max_new_tokens=7, do_sample=False, use_cache=True,
                eos_token_id=None,
            )[0, 1:]
        assert row.tolist() == expected.tolist()


def test_beam_search_equals_transformers_best_beam(pair):
    """Without an end token every beam runs to the last step, where both
    searches rank the same `num_beams` sequences of equal length."""
    hf, ours, _ = pair
    tokens = ours.generate(PROMPTS, 5, sampler=keras_attn.samplers.BeamSearch(4))
    for prompt, row in zip(PROMPTS, tokens):
        with torch.no_grad():
            expected = hf.generate(
                torch.tensor([prompt]), max_new_tokens=5, num_beams=4, do_sample=False,
                early_stopping=False, eos_token_id=None,
            )[0, 1:]
        assert row.tolist() == expected.tolist()


def test_a_padded_batch_generates_what_each_row_does_alone(pair):
    reference, ours, _ = pair
    if reference.config.model_type == "mt5":
        # Padding is handled by the encoder-decoder walk T5 and mT5 share;
        # mT5 differs in its head and feed-forward, which the logits tests
        # above cover (one batch-1 compile per prompt bucket saved).
        pytest.skip("padding in generation: checked on T5, the same walk as mT5's")
    # As many steps as the greedy test above: on torch the batch's decoding
    # step is the one compiled there (same batch, bucket and cache).
    together = ours.generate(PROMPTS, 7, end_token_id=1)
    for prompt, row in zip(PROMPTS, together):
        np.testing.assert_array_equal(row, ours.generate([prompt], 7, end_token_id=1)[0])


def mesh_name(hf_name, mt5):
    """Hugging Face T5 name -> Mesh TensorFlow's (as bert4keras reads them),
    written here from bert4keras's `T5_Base.variable_mapping`."""
    norm = "rms_norm" if mt5 else "layer_norm"
    if hf_name == "shared.weight":
        return "shared/embedding"
    if hf_name in ("encoder.final_layer_norm.weight", "decoder.final_layer_norm.weight"):
        stack = hf_name.split(".")[0]
        return f"{stack}/{'rms_norm' if mt5 else 'final_layer_norm'}/scale"
    if hf_name == "lm_head.weight":
        return None  # v1.0 ties it; v1.1's is written below
    parts = hf_name.split(".")
    if parts[0] not in ("encoder", "decoder") or parts[1] != "block":
        return None
    stack, block, layer = parts[0], int(parts[2]), int(parts[4])
    prefix = f"{stack}/block_{block:03d}/layer_{layer:03d}"
    rest = ".".join(parts[5:])
    if rest == "layer_norm.weight":
        return f"{prefix}/{norm}/scale"
    module, projection = parts[5], parts[6]
    if projection == "relative_attention_bias":
        return f"{prefix}/{module}/relative_attention_bias"
    if module in ("SelfAttention", "EncDecAttention"):
        return f"{prefix}/{module}/{projection}"
    return f"{prefix}/DenseReluDense/{projection}/kernel"


def test_mesh_tensorflow_names_load_the_same_weights(pair, tmp_path):
    hf, ours, _ = pair
    mt5 = isinstance(hf, transformers.MT5ForConditionalGeneration)
    arrays = {}
    for name, tensor in hf.state_dict().items():
        target = mesh_name(name, mt5)
        if target is None:
            continue
        value = tensor.numpy()
        # Mesh TensorFlow stores kernels (in, out) and biases (heads, buckets).
        arrays[target] = value.T if value.ndim == 2 and name != "shared.weight" else value
    if mt5:
        arrays["decoder/logits/kernel"] = hf.state_dict()["shared.weight"].numpy().T
    prefix = write_tf_checkpoint(str(tmp_path / "model.ckpt"), arrays)
    config = {
        "vocab_size": SMALL["vocab_size"], "hidden_size": SMALL["d_model"],
        "num_hidden_layers": SMALL["num_layers"], "num_attention_heads": SMALL["num_heads"],
        "attention_head_size": SMALL["d_kv"], "intermediate_size": SMALL["d_ff"],
        "hidden_act": ["gelu_new", "linear"] if mt5 else "relu",
        "relative_attention_num_buckets": SMALL["relative_attention_num_buckets"],
        "relative_attention_max_distance": SMALL["relative_attention_max_distance"],
        "hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0,
    }
    inputs = {"encoder_token_ids": SOURCES, "decoder_token_ids": TARGETS}
    # A config that names no activation gets the variant's: ReLU for v1.0,
    # v1.1's gated tanh-GELU for mT5.
    for given in (config, {k: v for k, v in config.items() if k != "hidden_act"}):
        (tmp_path / "config.json").write_text(json.dumps(given))
        model = keras_attn.build_transformer_model(
            config_path=str(tmp_path / "config.json"), checkpoint_path=prefix,
            model="mt5.1.1" if mt5 else "t5.1.0", tie_word_embeddings=not mt5,
        )
        np.testing.assert_allclose(to_numpy(model(inputs)), to_numpy(ours(inputs)), atol=1e-6)


def test_fit_with_teacher_forcing_lowers_the_loss():
    """Targets shifted right are the decoder's inputs; padding (0) in the
    labels is ignored by the loss."""
    config = dict(
        vocab_size=30, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
        intermediate_size=32, attention_head_size=16, dropout_rate=0.0,
        attention_dropout_rate=0.0, initializer_range=0.3,
    )
    model = keras_attn.build_transformer_model(config, variant="t5")
    rng = np.random.default_rng(0)
    sources = rng.integers(2, 30, size=(16, 7))
    labels = np.concatenate([sources[:, :5], np.ones((16, 1), int)], axis=1)  # copy
    labels[::2, 4:] = 0  # padded targets
    decoder_inputs = np.concatenate([np.zeros((16, 1), int), labels[:, :-1]], axis=1)
    model.compile(
        optimizer=keras.optimizers.Adam(0.01), loss=keras_attn.TokenCrossEntropy(ignore_id=0)
    )
    inputs = {"encoder_token_ids": sources, "decoder_token_ids": decoder_inputs}
    history = model.fit(inputs, labels, epochs=30, batch_size=16, verbose=0)
    losses = history.history["loss"]
    assert np.isfinite(losses).all() and losses[-1] < 0.7 * losses[0]


def test_bert4keras_auto_regressive_decoder_takes_the_source(pair):
    """bert4keras's mT5 script: `AutoRegressiveDecoder(start_id=0, end_id=1)`
    with the source as `inputs`; the output starts with the decoder's start
    id, as bert4keras's does."""
    _, ours, _ = pair
    decoder = keras_attn.AutoRegressiveDecoder(ours, start_id=0, end_id=1, maxlen=6)
    best = decoder.beam_search([np.array(PROMPTS[0])], topk=4)
    search = keras_attn.samplers.BeamSearch(4, early_stopping="all_finished")  # the decoder's
    tokens = ours.generate([PROMPTS[0]], 6, sampler=search, end_token_id=1)[0]
    tokens = list(tokens)
    expected = [0] + (tokens[: tokens.index(1) + 1] if 1 in tokens else tokens)
    assert best[0] == 0
    np.testing.assert_array_equal(best, expected)
