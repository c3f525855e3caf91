import json

import pytest

from keras_attn.models.config_files import load_config

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


@pytest.mark.parametrize("key, value", [
    ("conditional_layer_norm", 3), ("with_pool", True), ("application", "mlm"),
])
def test_a_builder_keyword_in_a_configuration_is_an_error_naming_it(key, value):
    """A keyword of `build_transformer_model` in the configuration would be
    ignored there (an unconditional model for `conditional_layer_norm`): an
    error saying to pass it to the builder, not a warning."""
    with pytest.raises(ValueError, match=f"`{key}`.*pass {key}={value!r} to build_transformer_model"):
        load_config(dict(GOOGLE, **{key: value}))


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


# A value other than the default for every field (valid together), to see
# each field reach its part and come back under its name.
CHANGED = {
    "vocab_size": 99, "hidden_size": 24, "num_layers": 2, "num_heads": 4,
    "intermediate_size": 40, "hidden_act": "silu", "dropout_rate": 0.0,
    "attention_dropout_rate": 0.05, "max_position": 64, "segment_vocab_size": 0,
    "initializer_range": 0.03, "layer_norm_epsilon": 1e-6, "pad_token_id": 3,
    "embedding_size": 12, "attention_key_size": 8, "attention_head_size": 6,
    "num_key_value_heads": 2, "attention_bias": False, "mlp_bias": True,
    "feed_forward_gated": True, "num_decoder_layers": 3,
    "relative_attention_num_buckets": 8, "relative_attention_max_distance": 20,
    "decoder_start_token_id": 4, "mask_token_id": 5, "attention_window": 7,
    "log_n_train_length": 32, "attention_sink_tokens": 2, "attention_sinks": True,
    "layer_types": ["sliding_attention", "full_attention"], "hierarchical_position": 0.3,
    "blockwise_attention": False, "tta_diagonal_mask": False, "tta_naive_key_value": True,
    "max_relative_position": 9, "rotary_value": True, "rotary_base": 500.0,
    "rope_scaling": {"rope_type": "linear", "factor": 2.0}, "sliding_rotary_base": 50.0,
    "norm_bias": False, "inverse_layer_attention_scale": True,
    "query_pre_attention_scalar": 16.0, "attention_logit_soft_cap": 30.0,
    "final_logit_soft_cap": 20.0, "position_attention_types": ["c2p"],
    "position_buckets": 16, "max_relative_distance": 32, "share_attention_key": True,
    "relative_embedding_norm": True, "position_biased_input": False,
    "tie_word_embeddings": False, "encoder_only": True, "is_decoder": True,
    "checkpoint_family": "llama",
}


def test_every_field_reads_from_its_part_and_round_trips():
    from keras_attn import AttentionConfig, FeedForwardConfig, NormConfig, PositionConfig
    from keras_attn.models.transformer_config import FIELD_DEFAULTS, FIELDS, TransformerConfig

    assert set(CHANGED) == FIELDS
    # (blockwise attention and sink tokens exclude each other)
    assert [
        name for name, default in FIELD_DEFAULTS.items() if CHANGED[name] == default
    ] == ["blockwise_attention"]
    config = TransformerConfig(**CHANGED)
    parts = {
        "attention": AttentionConfig, "positions": PositionConfig,
        "feed_forward": FeedForwardConfig, "norm": NormConfig,
    }
    owners = {}
    for part, cls in parts.items():
        assert isinstance(getattr(config, part), cls)
        for name in vars(getattr(config, part)):
            owners[name] = part
            assert getattr(getattr(config, part), name) == getattr(config, name) == CHANGED[name]
    assert set(owners) < FIELDS  # the rest (sizes, ids, head) are the config's own
    assert all(getattr(config, name) == value for name, value in CHANGED.items())
    assert config.to_dict() == CHANGED
    assert TransformerConfig(**config.to_dict()) == config
    # The same config from its parts.
    by_part = {
        part: cls(**{name: CHANGED[name] for name, owner in owners.items() if owner == part})
        for part, cls in parts.items()
    }
    core = {name: value for name, value in CHANGED.items() if name not in owners}
    assert TransformerConfig(**core, **by_part) == config
    assert config.replace(num_heads=2).attention.num_heads == 2
    assert config.replace(num_heads=2) != config


def test_parts_check_their_fields_and_the_config_is_immutable():
    from keras_attn import AttentionConfig, PositionConfig
    from keras_attn.models.transformer_config import TransformerConfig

    with pytest.raises(ValueError, match=r"AttentionConfig: `num_heads` must be an integer >= 1; received 0"):
        AttentionConfig(num_heads=0)
    with pytest.raises(ValueError, match="num_attention_heads=6 is not a multiple of num_key_value_heads=4"):
        AttentionConfig(num_heads=6, num_key_value_heads=4)
    # RoPE scaling is put in one form once, by the part that holds it.
    scaling = PositionConfig(max_position=64, rope_scaling={"type": "linear", "factor": 2}).rope_scaling
    assert scaling["rope_type"] == "linear" and "type" not in scaling
    config = load_config(GOOGLE)
    with pytest.raises(AttributeError, match="immutable; use config.replace"):
        config.num_heads = 3
    with pytest.raises(TypeError, match=r"\['num_heads'\] given beside `attention`"):
        TransformerConfig(
            vocab_size=9, hidden_size=8, num_layers=1, intermediate_size=4, num_heads=2,
            attention=config.attention,
        )
    with pytest.raises(TypeError, match="unknown fields"):
        TransformerConfig(**config.to_dict(), num_head=3)
