import json

import pytest

from keras_attn.models.transformer_config import load_config

GOOGLE = {
    "vocab_size": 21128, "hidden_size": 768, "num_hidden_layers": 12,
    "num_attention_heads": 12, "intermediate_size": 3072, "hidden_act": "gelu",
    "hidden_dropout_prob": 0.1, "attention_probs_dropout_prob": 0.1,
    "max_position_embeddings": 512, "type_vocab_size": 2, "initializer_range": 0.02,
    "directionality": "bidi",
}


def test_google_names_are_normalised(tmp_path):
    path = tmp_path / "bert_config.json"
    path.write_text(json.dumps(GOOGLE))
    config = load_config(str(path))
    assert (config.num_layers, config.num_heads, config.segment_vocab_size) == (12, 12, 2)
    assert config.head_size == 64 and config.key_size == 64
    assert config.embedding_width == 768


def test_overrides_accept_both_spellings_and_reject_unknown_fields():
    assert load_config(GOOGLE, dropout_rate=0.0).dropout_rate == 0.0
    assert load_config(GOOGLE, hidden_dropout_prob=0.2).dropout_rate == 0.2
    with pytest.raises(ValueError, match="num_layer"):
        load_config(GOOGLE, num_layer=3)


def test_roberta_plus_fields_and_activation_names():
    config = load_config(dict(GOOGLE, attention_key_size=128, embedding_size=128, hidden_act="gelu_new"))
    assert config.key_size == 128 and config.head_size == 64
    assert config.embedding_width == 128
    assert config.hidden_act == "gelu_approximate"


@pytest.mark.parametrize(
    "change, match",
    [
        ({"position_embedding_type": "relative_key"}, "position_embedding_type"),
        ({"hidden_act": "mish"}, "hidden_act"),
        ({"num_attention_heads": 7}, "divisible"),
    ],
)
def test_unsupported_configurations_are_errors(change, match):
    with pytest.raises(ValueError, match=match):
        load_config(dict(GOOGLE, **change))


def test_missing_fields_and_files_are_named(tmp_path):
    with pytest.raises(ValueError, match="intermediate_size"):
        load_config({k: v for k, v in GOOGLE.items() if k != "intermediate_size"})
    with pytest.raises(FileNotFoundError, match="nowhere.json"):
        load_config(str(tmp_path / "nowhere.json"))
    broken = tmp_path / "broken.json"
    broken.write_text("{not json")
    with pytest.raises(ValueError, match="broken.json"):
        load_config(str(broken))


def test_unknown_file_fields_warn_instead_of_vanishing():
    with pytest.warns(UserWarning, match="mystery_field"):
        load_config(dict(GOOGLE, mystery_field=1))


def test_conflicting_spellings_are_an_error():
    with pytest.raises(ValueError, match="twice"):
        load_config(dict(GOOGLE, num_layers=6))


def test_layer_types_give_each_layer_its_window_and_rope_base():
    config = load_config(dict(
        GOOGLE, num_hidden_layers=3, attention_window=8, rope_theta=100.0,
        layer_types=("full_attention", "sliding_attention", "full_attention"),
        sliding_rotary_base=10.0,
    ))
    assert config.layer_types == ["full_attention", "sliding_attention", "full_attention"]
    assert [config.layer_window(index) for index in range(3)] == [None, 8, None]
    assert [config.layer_rotary_base(index) for index in range(3)] == [100.0, 10.0, 100.0]
    # Without `layer_types` every layer has the window and the base.
    plain = load_config(dict(GOOGLE, attention_window=8))
    assert (plain.layer_window(5), plain.layer_rotary_base(5)) == (8, 10000.0)


@pytest.mark.parametrize(
    "change, match",
    [
        ({"layer_types": ["full_attention"]}, "`layer_types` has 1 entries for num_layers=12"),
        ({"layer_types": ["local"] * 12}, "`layer_types` must be a list of"),
        ({"layer_types": ["sliding_attention"] * 12}, "`attention_window`.*not given"),
        ({"sliding_rotary_base": 10.0}, "`sliding_rotary_base=10.0`.*not given"),
    ],
)
def test_bad_layer_types_are_errors(change, match):
    with pytest.raises(ValueError, match=match):
        load_config(dict(GOOGLE, **change))
