"""ModernBERT against transformers: masked-LM logits and the encoder's last
hidden state with right padding, both config spellings (transformers 5's
`layer_types`/`rope_parameters` and the released checkpoints'
`global_attn_every_n_layers`/`global_rope_theta`/`local_rope_theta`), that
the local window changes the outputs, and the configs this builder refuses.

One tiny random model per case: 4 layers, global every 3 (global, local,
local, global), a local window of 4 under sequences of 12 tokens (the
banded path), RoPE bases of their own per layer kind, an odd vocabulary;
bias-free norms and projections with a tied decoder, then every bias with
an untied decoder."""

import json
import shutil

import numpy as np
import pytest

import keras_attn
from keras_attn.convert import main as convert
from tests.checkpoint_files import perturb
from tests.harness import to_numpy

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

COMMON = dict(
    vocab_size=99, hidden_size=32, num_hidden_layers=4, num_attention_heads=4,
    intermediate_size=40, local_attention=4, global_attn_every_n_layers=3,
    pad_token_id=0, bos_token_id=1, eos_token_id=2, cls_token_id=1, sep_token_id=2,
    rope_parameters={
        "full_attention": {"rope_type": "default", "rope_theta": 1000.0},
        "sliding_attention": {"rope_type": "default", "rope_theta": 50.0},
    },
)
CASES = {
    "bias_free": dict(),
    # An odd window: 3 keys on each side, as transformers reads 7 // 2.
    "biases": dict(norm_bias=True, attention_bias=True, mlp_bias=True, tie_word_embeddings=False,
                   local_attention=7),
}
# Right padding (pad id 0): the second row has 8 real tokens.
IDS = np.array([
    [5, 17, 3, 44, 9, 28, 2, 61, 7, 80, 19, 36],
    [7, 12, 50, 33, 8, 91, 23, 14, 0, 0, 0, 0],
])
REAL = IDS != 0


@pytest.fixture(scope="module", params=sorted(CASES))
def reference(request, tmp_path_factory):
    """`(transformers ModernBertForMaskedLM, its directory)`, saved once."""
    torch.manual_seed(0)
    config = transformers.ModernBertConfig(
        **dict(COMMON, **CASES[request.param]), attn_implementation="eager"
    )
    model = transformers.ModernBertForMaskedLM(config)
    # Weights large enough that every output depends on the context.
    model = perturb(model, seed=1).eval()
    directory = tmp_path_factory.mktemp(request.param)
    model.save_pretrained(directory)
    return model, directory


def expected_logits(model):
    with torch.no_grad():
        return model(torch.tensor(IDS), attention_mask=torch.tensor(REAL.astype(int))).logits.numpy()


def test_masked_lm_logits_equal_transformers(reference):
    model, directory = reference
    ours = keras_attn.build_transformer_model(directory, application="mlm")
    assert type(ours.template).__name__ == "ModernBert"
    logits = to_numpy(ours(IDS))
    np.testing.assert_allclose(logits[REAL], expected_logits(model)[REAL], atol=1e-4)


def test_encoder_equals_the_base_model(reference, tmp_path):
    """`application="encoder"` from a folder saved from `ModernBertModel`."""
    model, _ = reference
    model.model.save_pretrained(tmp_path)
    encoder = keras_attn.build_transformer_model(tmp_path)
    assert encoder.application == "encoder"
    hidden = to_numpy(encoder(IDS))
    with torch.no_grad():
        expected = model.model(
            torch.tensor(IDS), attention_mask=torch.tensor(REAL.astype(int))
        ).last_hidden_state.numpy()
    np.testing.assert_allclose(hidden[REAL], expected[REAL], atol=1e-5)


@pytest.mark.parametrize("reference", ["biases"], indirect=True)
def test_the_converter_checks_the_masked_lm_logits(reference, tmp_path, capsys):
    """`keras-attn-convert` converts a `ModernBertForMaskedLM` folder with
    its head and compares it with `AutoModelForMaskedLM`'s logits (one case:
    the converter's first run is seconds)."""
    model, directory = reference
    output = tmp_path / "converted"
    assert convert([str(directory), str(output), "--quiet"]) == 0
    assert "transformers.AutoModelForMaskedLM's logits" in capsys.readouterr().out
    reloaded = keras_attn.build_transformer_model(
        output / "config.json", output / "model.weights.h5", application="mlm"
    )
    logits = to_numpy(reloaded(IDS))
    np.testing.assert_allclose(logits[REAL], expected_logits(model)[REAL], atol=1e-4)


def released_spelling(directory, target):
    """A copy of `directory` whose config says the attention pattern as the
    released checkpoints' configs do."""
    shutil.copytree(directory, target)
    with open(target / "config.json") as file:
        config = json.load(file)
    parameters = config.pop("rope_parameters")
    del config["layer_types"]
    config.update(
        global_attn_every_n_layers=3,
        global_rope_theta=parameters["full_attention"]["rope_theta"],
        local_rope_theta=parameters["sliding_attention"]["rope_theta"],
        layer_norm_eps=config["norm_eps"],
        position_embedding_type="absolute",
        reference_compile=False,
        unpad_inputs=True,
    )
    with open(target / "config.json", "w") as file:
        json.dump(config, file)
    return target


def test_released_config_spelling_reads_the_same(reference, tmp_path):
    model, directory = reference
    folder = released_spelling(directory, tmp_path / "released")
    ours = keras_attn.build_transformer_model(folder, application="mlm")
    config = ours.template.config
    assert config.layer_types == [
        "full_attention", "sliding_attention", "sliding_attention", "full_attention"
    ]
    assert (config.attention_window, config.rotary_base, config.sliding_rotary_base) == (
        model.config.local_attention, 1000.0, 50.0
    )
    logits = to_numpy(ours(IDS))
    np.testing.assert_allclose(logits[REAL], expected_logits(model)[REAL], atol=1e-4)


def test_the_local_window_changes_the_outputs(reference):
    """With every layer global the logits differ: the sequences are longer
    than the window, so the parity above depends on it."""
    model, directory = reference
    everywhere = keras_attn.build_transformer_model(
        directory, application="mlm", layer_types=["full_attention"] * 4
    )
    logits = to_numpy(everywhere(IDS))
    assert np.abs(logits[REAL] - expected_logits(model)[REAL]).max() > 1e-2


TINY = dict(
    model_type="modernbert", vocab_size=99, hidden_size=32, num_hidden_layers=3,
    num_attention_heads=4, intermediate_size=40, pad_token_id=0, local_attention=4,
)


@pytest.mark.parametrize("fields, message", [
    (dict(local_attention=2.5), "`local_attention`.*positive integer; received 2.5"),
    (dict(local_attention=0), "`local_attention`.*positive integer; received 0"),
    (dict(layer_types=["full_attention", "chunked_attention", "full_attention"]),
     "`layer_types` must be a list of"),
    (dict(layer_types=["full_attention", "sliding_attention"]),
     "`layer_types` has 2 entries for num_layers=3"),
    (dict(global_attn_every_n_layers=0), "`global_attn_every_n_layers` must be a positive"),
    (dict(rope_parameters={"full_attention": {"rope_type": "linear", "factor": 2.0,
                                              "rope_theta": 10.0}}),
     "rope_type='linear'"),
    (dict(rope_parameters={"rope_type": "default", "rope_theta": 10.0}),
     "one dict per layer type"),
    (dict(mlp_dropout=0.1), "supports only `mlp_dropout=0.0`"),
    (dict(classifier_bias=True), "supports only `classifier_bias=False`"),
    (dict(decoder_bias=False), "supports only `decoder_bias=True`"),
    (dict(classifier_activation="silu"), "`classifier_activation='silu'` differs"),
])
def test_unsupported_configs_are_clear_errors(fields, message):
    with pytest.raises(ValueError, match=message):
        keras_attn.build_transformer_model({**TINY, **fields}, application="mlm")


def test_a_shared_block_refuses_layer_types_that_differ():
    """ALBERT's one block cannot attend locally in some layers only."""
    config = dict(
        vocab_size=30, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
        intermediate_size=16, attention_window=4,
    )
    with pytest.raises(ValueError, match=r"Albert shares one block.*differs by layer"):
        keras_attn.build_transformer_model(
            dict(config, layer_types=["full_attention", "sliding_attention"]), variant="albert"
        )
    model = keras_attn.build_transformer_model(
        dict(config, layer_types=["sliding_attention"] * 2), variant="albert"
    )
    assert model.get_layer("Transformer-MultiHeadSelfAttention").attention_window == 4
