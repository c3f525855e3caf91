"""DeBERTa v2/v3 against transformers: masked-LM logits (both heads),
the encoder's last hidden state and the sequence classifier's pooled
logits with right and left padding, and the configs this builder refuses.

One tiny random model per case, each with odd options: v3's (shared
query/key projections for the table, log buckets well under the 12 tokens,
a normalised table, no absolute positions, no token types, the
`lm_predictions` head), v2's (projections of their own, exact distances
clipped at 5, absolute positions and token types, the tanh GELU, the old
`"c2p|p2c"` string, the legacy `cls.predictions` head; transformers'
DeBERTa cannot have heads narrower than `hidden_size / heads`, its output
projection being square), and one term alone (`p2c`, buckets reaching `max_position`)."""

import json

import numpy as np
import pytest

import keras_attn
from keras_attn.layers.disentangled_attention import log_bucket_positions
from tests.checkpoint_files import perturb
from tests.harness import to_numpy

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

COMMON = dict(
    vocab_size=99, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
    intermediate_size=40, max_position_embeddings=40, hidden_dropout_prob=0.0,
    attention_probs_dropout_prob=0.0, pad_token_id=0, relative_attention=True,
)
CASES = {
    "v3": dict(
        pos_att_type=["p2c", "c2p"], position_buckets=8, max_relative_positions=20,
        share_att_key=True, norm_rel_ebd="layer_norm", position_biased_input=False,
        type_vocab_size=0, legacy=False,
    ),
    "v2": dict(
        pos_att_type="c2p|p2c", max_relative_positions=5, share_att_key=False,
        position_biased_input=True, type_vocab_size=2, legacy=True,
        hidden_act="gelu_new",
    ),
    "p2c_only": dict(
        pos_att_type=["p2c"], position_buckets=6, share_att_key=False,
        norm_rel_ebd="layer_norm", position_biased_input=False, type_vocab_size=0,
    ),
}
# Padding (pad id 0): the second row has 8 real tokens, then padding; the
# third the same 8 after padding (positions count from the padding, as
# transformers' do).
IDS = np.array([
    [5, 17, 3, 44, 9, 28, 2, 61, 7, 80, 19, 36],
    [7, 12, 50, 33, 8, 91, 23, 14, 0, 0, 0, 0],
    [0, 0, 0, 0, 7, 12, 50, 33, 8, 91, 23, 14],
])
REAL = IDS != 0
# Two segments where the model has token types (the v2 case).
SEGMENTS = np.array([[0] * 6 + [1] * 6, [0] * 4 + [1] * 4 + [0] * 4, [0] * 8 + [1] * 4])


@pytest.fixture(scope="module", params=sorted(CASES))
def reference(request, tmp_path_factory):
    """`(transformers DebertaV2ForMaskedLM, its directory, case)`, saved once."""
    torch.manual_seed(0)
    config = transformers.DebertaV2Config(**COMMON, **CASES[request.param])
    # Weights large enough that every output depends on the context.
    model = perturb(transformers.DebertaV2ForMaskedLM(config), seed=1).eval()
    directory = tmp_path_factory.mktemp(request.param)
    model.save_pretrained(directory)
    return model, directory, request.param


def torch_inputs():
    """transformers' keyword arguments for `IDS`."""
    return dict(
        input_ids=torch.tensor(IDS), attention_mask=torch.tensor(REAL.astype(int)),
        token_type_ids=torch.tensor(SEGMENTS),
    )


def ours_on(model):
    """`model`'s outputs on `IDS` (and `SEGMENTS` where it takes them)."""
    inputs = {"token_ids": IDS}
    if "segment_ids" in model.template.get_inputs():
        inputs["segment_ids"] = SEGMENTS
    outputs = model(inputs)
    if isinstance(outputs, dict):
        return {name: to_numpy(value) for name, value in outputs.items()}
    return to_numpy(outputs)


def test_masked_lm_logits_equal_transformers(reference):
    model, directory, _ = reference
    ours = keras_attn.build_transformer_model(directory, application="mlm")
    assert type(ours.template).__name__ == "DebertaV2"
    with torch.no_grad():
        expected = model(**torch_inputs()).logits.numpy()
    np.testing.assert_allclose(ours_on(ours)[REAL], expected[REAL], atol=1e-4)


def test_encoder_equals_the_base_model(reference, tmp_path):
    """`application="encoder"` from a folder saved from `DebertaV2Model`."""
    model, _, _ = reference
    model.deberta.save_pretrained(tmp_path)
    encoder = keras_attn.build_transformer_model(tmp_path)
    assert encoder.application == "encoder"
    with torch.no_grad():
        expected = model.deberta(**torch_inputs()).last_hidden_state.numpy()
    np.testing.assert_allclose(ours_on(encoder)[REAL], expected[REAL], atol=1e-5)


@pytest.mark.parametrize("reference", ["v3"], indirect=True)
def test_the_sequence_classifier_is_the_gelu_pooler(reference, tmp_path):
    """`DebertaV2ForSequenceClassification`: `with_pool="gelu"` is its
    `ContextPooler` (read from `pooler.dense`); its classifier applied to
    `pooled_output` gives transformers' logits."""
    model, _, _ = reference
    torch.manual_seed(2)
    classifier = transformers.DebertaV2ForSequenceClassification(model.config)
    classifier.deberta.load_state_dict(model.deberta.state_dict())
    classifier = perturb(classifier, seed=3).eval()
    classifier.save_pretrained(tmp_path)
    with pytest.warns(UserWarning, match="classifier.weight"):
        ours = keras_attn.build_transformer_model(tmp_path, with_pool="gelu")
    pooled = ours_on(ours)["pooled_output"]
    weight = classifier.classifier.weight.detach().numpy()
    logits = pooled @ weight.T + classifier.classifier.bias.detach().numpy()
    with torch.no_grad():
        expected = classifier(**torch_inputs()).logits.numpy()
    # The right-padded rows: the pooler reads the first token, padding in
    # the left-padded row (whose hidden state transformers, masking padded
    # queries too, computes otherwise; no real token reads it).
    np.testing.assert_allclose(logits[:2], expected[:2], atol=1e-4)


@pytest.mark.parametrize("reference", ["v3"], indirect=True)
def test_the_position_terms_change_the_outputs(reference):
    """Built without them (`relative_attention: false`) the logits differ,
    so the parity above depends on the disentangled terms."""
    model, directory, _ = reference
    with pytest.warns(UserWarning, match="rel_embeddings"):
        plain = keras_attn.build_transformer_model(
            directory, application="mlm", position_attention_types=None
        )
    assert "Relative-Embedding" not in [layer.name for layer in plain.layers]
    with torch.no_grad():
        expected = model(**torch_inputs()).logits.numpy()
    assert np.abs(ours_on(plain)[REAL] - expected[REAL]).max() > 1e-2


def test_log_buckets_equal_transformers():
    """The bucketing on distances far past the buckets, against
    transformers' `make_log_bucket_position`."""
    from transformers.models.deberta_v2.modeling_deberta_v2 import make_log_bucket_position

    distance = np.arange(-300, 301)
    for buckets, max_distance in ((8, 20), (256, 512), (6, 40)):
        expected = make_log_bucket_position(torch.tensor(distance), buckets, max_distance)
        ours = to_numpy(log_bucket_positions(distance, buckets, max_distance))
        np.testing.assert_array_equal(ours, expected.long().numpy())


@pytest.mark.parametrize("reference", ["v3"], indirect=True)
def test_a_deberta_model_does_not_generate(reference):
    _, directory, _ = reference
    model = keras_attn.build_transformer_model(directory, application="mlm")
    with pytest.raises(ValueError, match="Generation needs a model built with application='lm'"):
        model.generate(IDS[:1, :3], max_new_tokens=2)


TINY = dict(
    model_type="deberta-v2", vocab_size=99, hidden_size=32, num_hidden_layers=1,
    num_attention_heads=4, intermediate_size=40, relative_attention=True,
    pos_att_type=["c2p", "p2c"], position_buckets=8, max_relative_positions=20,
)


@pytest.mark.parametrize("fields, message", [
    (dict(pos_att_type=["c2p", "p2p"]), r"`pos_att_type=\['c2p', 'p2p'\]`.*\['p2p'\]"),
    (dict(pos_att_type="c2p|c2c"), r"`pos_att_type=\['c2p', 'c2c'\]`"),
    (dict(pos_att_type=[]), r"`pos_att_type=\[\]`: relative attention needs"),
    (dict(relative_attention=False), r"`pos_att_type=.*relative_attention: false"),
    (dict(norm_rel_ebd="batch_norm"), r"`norm_rel_ebd='batch_norm'`.*\['batch_norm'\] unknown"),
    (dict(conv_kernel_size=3), r"`conv_kernel_size=3`: the convolution layer"),
    (dict(embedding_size=16), r"`embedding_size=16`: differs from `hidden_size`=32"),
    (dict(pooler_hidden_size=16), r"`pooler_hidden_size=16`"),
    (dict(position_buckets=1.5), r"`position_buckets=1.5`: must be an integer"),
    (dict(position_buckets=40), r"`max_relative_positions` \(20\) must exceed"),
])
def test_unsupported_configs_are_clear_errors(fields, message):
    with pytest.raises(ValueError, match=message):
        keras_attn.build_transformer_model({**TINY, **fields}, application="mlm")


def test_the_variant_refuses_a_factorised_embedding():
    """A config in this library's names too (no `model_type`)."""
    config = dict(vocab_size=99, hidden_size=32, num_hidden_layers=1, num_attention_heads=4,
                  intermediate_size=40, embedding_size=16)
    with pytest.raises(ValueError, match=r"`embed_proj`.*embedding_size=16, hidden_size=32"):
        keras_attn.build_transformer_model(config, variant="deberta_v2")


def test_plain_attention_without_relative_attention(tmp_path):
    """`relative_attention: false` without position terms (DebertaV2Config's
    default) is BERT's attention, scaled by `1 / sqrt(head_size)`."""
    torch.manual_seed(0)
    config = transformers.DebertaV2Config(**dict(COMMON, relative_attention=False))
    model = perturb(transformers.DebertaV2Model(config), seed=1).eval()
    model.save_pretrained(tmp_path)
    with open(tmp_path / "config.json") as file:
        assert not json.load(file)["relative_attention"]
    ours = keras_attn.build_transformer_model(tmp_path)
    with torch.no_grad():
        expected = model(**torch_inputs()).last_hidden_state.numpy()
    np.testing.assert_allclose(ours_on(ours)[REAL], expected[REAL], atol=1e-5)


@pytest.mark.parametrize("reference", ["v3"], indirect=True)
def test_the_converter_checks_against_transformers_and_keeps_the_model(reference, tmp_path,
                                                                      capsys):
    """`keras-attn-convert` on a DeBERTa folder: verified against
    transformers' masked LM, and the config and weights it writes rebuild
    the same model."""
    from keras_attn.convert import main

    model, directory, _ = reference
    output = tmp_path / "converted"
    assert main([str(directory), str(output), "--quiet"]) == 0
    # The folder's architecture, DebertaV2ForMaskedLM, picks the masked LM.
    assert "transformers.AutoModelForMaskedLM's logits" in capsys.readouterr().out
    converted = keras_attn.build_transformer_model(
        f"{output}/config.json", f"{output}/model.weights.h5", application="mlm"
    )
    with torch.no_grad():
        expected = model(**torch_inputs()).logits.numpy()
    np.testing.assert_allclose(ours_on(converted)[REAL], expected[REAL], atol=1e-4)
