"""Position objects (`keras_attn.layers.positions`) and
`MultiHeadAttention(position=...)` (issue 51, item 1): each object's
constructor errors; each object gives exactly the outputs of the former
position arguments it replaces, and other outputs when changed; the former
arguments warn, saved configs holding them load silently; the committed
`.keras` files of the position variants load without a warning and compute
what they computed."""

import glob
import os
import warnings

import keras
import numpy as np
import pytest

import keras_attn
from keras_attn.layers import FunctionalRelative
from keras_attn.layers import ReRoPE
from keras_attn.layers import Rotary
from keras_attn.layers import XPos
from keras_attn.layers import positions
from keras_attn.layers.key_value_cache import CacheStep
from tests import reference
from tests.harness import run_layer_test
from tests.harness import to_numpy

RNG = np.random.default_rng(51)
YARN = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 4}
FIXTURES = os.path.join(os.path.dirname(os.path.dirname(__file__)), "fixtures", "variants")

# (former arguments, the object they give)
CASES = {
    "rotary": ({"position_encoding": "rotary"}, Rotary()),
    "rotary_half_base": (
        {"position_encoding": "rotary", "rotary_layout": "half", "rotary_max_wavelength": 500},
        Rotary(500, layout="half"),
    ),
    "rotary_values": ({"position_encoding": "rotary", "rotary_value": True}, Rotary(rotate_values=True)),
    "rotary_yarn": ({"position_encoding": "rotary", "rotary_scaling": YARN}, Rotary(scaling=YARN)),
    "xpos": ({"position_encoding": "xpos", "xpos_scale_base": 64}, XPos(scale_base=64)),
    "rerope": (
        {"position_encoding": "rotary", "rotary_scaling": {"rope_type": "rerope", "window": 3}},
        ReRoPE(3),
    ),
    "leaky_rerope": (
        {"position_encoding": "rotary", "rotary_layout": "half",
         "rotary_scaling": {"rope_type": "leaky_rerope", "window": 2, "k": 4}},
        ReRoPE(2, k=4, layout="half"),
    ),
    "functional_relative": (
        {"position_encoding": "functional_relative", "max_relative_position": 3},
        FunctionalRelative(3),
    ),
}
# A change of each object that must change the outputs.
PERTURBED = {
    "rotary": Rotary(layout="half"),
    "rotary_half_base": Rotary(600, layout="half"),
    "rotary_values": Rotary(),
    "rotary_yarn": Rotary(scaling=dict(YARN, factor=2.0)),
    "xpos": XPos(scale_base=32),
    "rerope": ReRoPE(2),
    "leaky_rerope": ReRoPE(2, k=2, layout="half"),
    "functional_relative": FunctionalRelative(2),
}


def old_layer(arguments, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        return keras_attn.MultiHeadAttention(2, 8, **arguments, **kwargs)


def outputs(layer, x, like=None):
    layer.build(x.shape)
    if like is not None:
        layer.set_weights(like.get_weights())
    return to_numpy(layer(x, use_causal_mask=True))


@pytest.mark.parametrize(
    "build, message",
    [
        (lambda: Rotary(layout="rotate_half"), r"`layout` must be one of .*'rotate_half'"),
        (lambda: Rotary(base=0), "`base` must be a positive number; received 0"),
        (lambda: Rotary(rotate_values="yes"), "`rotate_values` must be True or False.*'yes'"),
        (lambda: Rotary(scaling={"rope_type": "yarn"}), "missing"),
        (lambda: Rotary(scaling={"rope_type": "rerope", "window": 4}), "use `keras_attn.layers.ReRoPE`"),
        (lambda: XPos(scale_base=-1), "`scale_base` must be a positive number; received -1"),
        (lambda: ReRoPE(0), "`window` must be a positive integer.*received 0"),
        (lambda: ReRoPE(4, k=0.5), "`k`.*>= 1; received 0.5"),
        (lambda: ReRoPE(4, layout="odd"), "`layout` must be one of"),
        (lambda: FunctionalRelative(0), "max_relative_position.*received 0"),
    ],
    ids=["layout", "base", "rotate_values", "scaling", "clipped", "scale_base", "window", "k",
         "rerope_layout", "max_relative_position"],
)
def test_constructors_name_the_bad_argument(build, message):
    with pytest.raises(ValueError, match=message):
        build()


def test_attention_checks_its_position_and_widths():
    with pytest.raises(ValueError, match="`position` must be None or a position object.*'rotary'"):
        keras_attn.MultiHeadAttention(2, 8, position="rotary")
    with pytest.raises(ValueError, match=r"Rotary\(.*even query/key width d; received key_size=5"):
        keras_attn.MultiHeadAttention(2, 4, key_size=5, position=Rotary())
    with pytest.raises(ValueError, match="needs an even `head_size`; received head_size=3"):
        keras_attn.MultiHeadAttention(2, 3, key_size=4, position=Rotary(rotate_values=True))
    with pytest.raises(ValueError, match="d > 2"):
        keras_attn.MultiHeadAttention(2, 2, position=XPos(scaling={"rope_type": "ntk", "factor": 2.0}))
    with pytest.raises(ValueError, match="not both"):
        keras_attn.MultiHeadAttention(2, 8, position=Rotary(), position_encoding="rotary")
    with pytest.raises(ValueError, match="values are not rotated"):
        keras_attn.layers.GatedAttentionUnit(8, 4, position=Rotary(rotate_values=True))


@pytest.mark.parametrize("case", sorted(CASES))
def test_an_object_computes_what_the_former_arguments_did(case):
    arguments, position = CASES[case]
    x = RNG.normal(size=(2, 7, 16)).astype("float32")
    old = old_layer(arguments)
    assert old.position == position
    expected = outputs(old, x)
    new = keras_attn.MultiHeadAttention(2, 8, position=position)
    np.testing.assert_array_equal(outputs(new, x, like=old), expected)
    # Not vacuous: another setting of the object moves the outputs.
    perturbed = keras_attn.MultiHeadAttention(2, 8, position=PERTURBED[case])
    assert np.abs(outputs(perturbed, x, like=old) - expected).max() > 1e-4
    # The former attributes still read.
    for name, value in arguments.items():
        assert getattr(new, name) == value, name


def test_rotary_against_numpy(tmp_path):
    query = RNG.normal(size=(2, 6, 8)).astype("float32")

    def numpy_reference(layer, inputs):
        def rotate(q, k):
            return reference.rope(q, base=500.0), reference.rope(k, base=500.0)

        return reference.attention(layer, inputs["query"], rotate=rotate)[0]

    run_layer_test(
        keras_attn.MultiHeadAttention,
        {"heads": 2, "head_size": 4, "position": Rotary(500)},
        inputs={"query": query},
        expected_output_shape=(2, 6, 8),
        reference=numpy_reference,
        tmp_path=tmp_path,
    )


@pytest.mark.parametrize("case", sorted(CASES))
def test_former_arguments_warn_and_name_the_object(case):
    arguments, position = CASES[case]
    with pytest.warns(DeprecationWarning, match=r"position=%s\(" % type(position).__name__):
        keras_attn.MultiHeadAttention(2, 8, **arguments)


@pytest.mark.parametrize("case", sorted(CASES))
def test_configs_round_trip_and_former_configs_load_silently(case):
    arguments, position = CASES[case]
    layer = keras_attn.MultiHeadAttention(2, 8, position=position)
    config = layer.get_config()
    assert not set(positions.LEGACY_ARGUMENTS) & set(config)
    assert keras_attn.MultiHeadAttention.from_config(config).position == position
    # A config as written before `position`: every former argument present.
    former = dict(config, **positions.legacy_arguments(position))
    del former["position"]
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        loaded = keras_attn.MultiHeadAttention.from_config(former)
    assert loaded.position == position
    restored = keras.saving.deserialize_keras_object(keras.saving.serialize_keras_object(position))
    assert restored == position and restored is not position


@pytest.mark.parametrize(
    "variant, expected",
    [
        ("roformer_encoder", Rotary()),
        ("xpos_lm", XPos()),
        ("nezha_encoder", FunctionalRelative(64)),
        ("llama_lm", Rotary(layout="half")),
        ("gau_alpha_encoder", Rotary()),
    ],
)
def test_saved_variants_load_without_warnings(variant, expected):
    (path,) = glob.glob(os.path.join(FIXTURES, f"{variant}_*.keras"))
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        model = keras.saving.load_model(path)
    kind = "GatedAttentionUnit" if variant.startswith("gau") else "MultiHeadSelfAttention"
    attention = model.get_layer(f"Transformer-0-{kind}")
    assert attention.position == expected
    saved = dict(np.load(path.removesuffix(".keras") + "_outputs.npz"))
    inputs = {name: saved.pop(name) for name in model.named_inputs}
    result = model(inputs)
    result = result if isinstance(result, dict) else {"output": result}
    for name, value in saved.items():
        np.testing.assert_allclose(to_numpy(result[name]), value, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize(
    "make",
    [
        lambda **kwargs: keras_attn.TalkingHeadsAttention(heads=2, head_size=8, **kwargs),
        lambda **kwargs: keras_attn.layers.GatedAttentionUnit(units=16, key_size=8, **kwargs),
    ],
    ids=["talking_heads", "gated_attention_unit"],
)
def test_subclasses_take_a_position_and_load_former_configs(make):
    x = RNG.normal(size=(2, 7, 16)).astype("float32")
    layer = make(position=Rotary(layout="half"))
    expected = outputs(layer, x)
    former = dict(layer.get_config(), position_encoding="rotary", rotary_layout="half")
    del former["position"]
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        loaded = type(layer).from_config(former)
    assert loaded.position == Rotary(layout="half")
    np.testing.assert_array_equal(outputs(loaded, x, like=layer), expected)
    assert np.abs(outputs(make(), x, like=layer) - expected).max() > 1e-4


def test_a_model_computes_each_rotary_table_once_per_pass(monkeypatch):
    """Rotary tables are computed once per pass and position object, as
    transformers' `position_embeddings` (issue 51, item 1): Gemma 3's three
    blocks of two RoPE bases compute two per full pass and two per decoding
    step, where each attention alone computed three; and given tables,
    queries, keys and values (YaRN's factor, values of their own width,
    positions of each row) come out bit for bit as without."""
    config = dict(
        vocab_size=40, hidden_size=16, num_hidden_layers=3, num_attention_heads=2,
        num_key_value_heads=1, attention_head_size=6, intermediate_size=24,
        max_position_embeddings=48, sliding_rotary_base=100.0, attention_window=3,
        layer_types=["sliding_attention", "full_attention", "sliding_attention"],
    )
    model = keras_attn.build_transformer_model(config, variant="gemma3", application="lm")
    ids = RNG.integers(4, 40, size=(2, 6)).astype("int32")
    forward = keras_attn.generation.CachedForward(model)
    cache = forward.empty_cache(2, 8)
    computed = []
    original = keras_attn.layers.RotaryEmbedding.tables

    def counted(self, *args, **kwargs):
        computed.append(self.max_wavelength)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(keras_attn.layers.RotaryEmbedding, "tables", counted)
    model({"token_ids": ids})
    assert sorted(computed) == [100.0, 10000.0]
    computed.clear()
    forward(ids[:, :1], 0, cache)
    assert sorted(computed) == [100.0, 10000.0]

    position = Rotary(scaling=YARN, rotate_values=True)
    layer = keras_attn.MultiHeadAttention(2, 6, key_size=8, position=position)
    x = RNG.normal(size=(2, 5, 16)).astype("float32")
    tables = layer.rotary_tables(np.arange(5, dtype="int32"))
    np.testing.assert_array_equal(
        to_numpy(layer(x, rotary_tables=tables, use_causal_mask=True)),
        to_numpy(layer(x, use_causal_mask=True)),
    )
    # A decoding step of rows at positions 4 and 2, writing slot 0.
    rows = np.array([[4], [2]], "int32")
    step = CacheStep(
        slot=np.int32(0), positions=np.array([0], "int32"),
        key_positions=np.array([0, -1, -1, -1, -1], "int32"), row_positions=rows,
    )
    outputs = [
        layer(x[:, :1], cache=layer.empty_cache(2, 5), cache_step=step, **given)
        for given in ({"rotary_tables": layer.rotary_tables(rows)}, {})
    ]
    np.testing.assert_array_equal(to_numpy(outputs[0][0]), to_numpy(outputs[1][0]))
    np.testing.assert_array_equal(to_numpy(outputs[0][1].keys), to_numpy(outputs[1][1].keys))
    with pytest.raises(ValueError, match="position=None"):
        keras_attn.MultiHeadAttention(2, 8)(x, rotary_tables=tables)

