"""Variants as declared traits (issue 51): every registered variant sits at
most two classes below `Transformer`, states what it computes as class
attributes the template reads, and docs/variants.md lists them as the
registry resolves them."""

import pathlib

import numpy as np
import pytest

import keras_attn
from keras_attn.models import VARIANTS
from keras_attn.models.traits import TRAITS
from keras_attn.models.variants import traits
from keras_attn.models.variants_page import variants_page
from tests.harness import to_numpy

PAGE = pathlib.Path(__file__).resolve().parents[2] / "docs" / "variants.md"
CONFIG = dict(
    vocab_size=30, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
    intermediate_size=24, max_position_embeddings=16, type_vocab_size=2,
    hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
)
TOKENS = np.array([[5, 9, 2, 7, 11, 4]], dtype="int32")


def depth_below_template(variant_class):
    """Classes from the template to `variant_class`, along its longest line
    of `Transformer` subclasses (mixins that are not one do not count)."""
    if variant_class is keras_attn.Transformer:
        return 0
    return 1 + max(
        depth_below_template(base)
        for base in variant_class.__bases__
        if issubclass(base, keras_attn.Transformer)
    )


def test_the_variants_page_is_the_generated_one():
    assert PAGE.read_text() == variants_page(), (
        "docs/variants.md is stale: rewrite it with "
        "`KERAS_BACKEND=jax .venv/bin/python -m keras_attn.models.variants_page > docs/variants.md`"
    )


@pytest.mark.parametrize("name", list(VARIANTS))
def test_a_variant_is_at_most_two_classes_below_the_template(name):
    assert depth_below_template(VARIANTS[name]) <= 2


@pytest.mark.parametrize("name", list(VARIANTS))
def test_the_page_has_a_section_of_every_trait_of_each_variant(name):
    section = PAGE.read_text().split(f"\n## {name}\n", 1)[1].split("\n## ", 1)[0]
    for trait in traits(name):
        if trait != "overridden_hooks":
            assert f"| `{trait}` |" in section, (name, trait)


def test_traits_resolve_through_mixins_and_the_template():
    gemma2 = traits("gemma2")
    # Gemma's own (`GemmaTraits`), LLaMA's and the template's, in one dict.
    assert gemma2["norm_scale_offset"] == 1.0 and gemma2["embedding_scale"] is True
    assert gemma2["norm"] == "rms" and gemma2["rotary_layout"] == "half"
    assert gemma2["sublayer_post_norms"] is True and traits("gemma")["sublayer_post_norms"] is False
    assert gemma2["mask_diagonal"] is False
    assert traits("bert")["overridden_hooks"] == []
    assert "make_block" in traits("gau_alpha")["overridden_hooks"]
    assert set(traits("bert")) == set(TRAITS) - {
        "default_attention_bias", "attention_output_bias", "query_key_norm",
    } | {"overridden_hooks"}
    with pytest.raises(ValueError, match="registered as 'no_such_variant'"):
        traits("no_such_variant")


def test_an_unknown_trait_value_is_refused_at_registration():
    class BatchNormed(keras_attn.Transformer):
        norm = "batch"

    with pytest.raises(TypeError, match=r"BatchNormed.norm must be one of \['layer', 'rms'\]"):
        keras_attn.register_variant("test_batch_normed", BatchNormed)


def test_traits_alone_build_what_they_state():
    """A variant of traits only: RMS norms with Gemma's offset, pre-norm
    blocks with a final norm, ALiBi instead of positions, the embedding as
    the head, causal in every application, no pooler, no token types."""

    @keras_attn.register_variant("test_traits_only")
    class TraitsOnly(keras_attn.Transformer):
        norm = "rms"
        norm_scale_offset = 1.0
        norm_first = True
        final_norm = True
        embedding_norm = False
        position_embedding = None
        relative_position_bias = "alibi"
        head = "embedding"
        causal = True
        pooler = False
        token_types = False

    model = keras_attn.build_transformer_model(
        dict(CONFIG), variant="test_traits_only", application="encoder"
    )
    names = {layer.name: layer for layer in model.layers}
    assert "Embedding-Position" not in names and "Embedding-Norm" not in names
    assert type(names["Position-Bias"]).__name__ == "ALiBiBias"
    assert names["Position-Bias"].causal
    norm = names["Transformer-0-FeedForward-Norm"]
    assert type(norm).__name__ == "RMSNormalization" and norm.scale_offset == 1.0
    assert "Output-Norm" in names and model.template.blocks[0].norm_first
    # Causal although `encoder`: a later token does not change an earlier output.
    changed = TOKENS.copy()
    changed[0, -1] = 13
    first, second = (to_numpy(model({"token_ids": ids})) for ids in (TOKENS, changed))
    np.testing.assert_array_equal(first[0, :-1], second[0, :-1])
    assert not np.allclose(first[0, -1], second[0, -1])

    lm = keras_attn.build_transformer_model(dict(CONFIG), variant="test_traits_only", application="lm")
    assert not any(layer.name.startswith("MLM-Dense") for layer in lm.layers)
    with pytest.raises(ValueError, match="no pooler"):
        keras_attn.build_transformer_model(dict(CONFIG), variant="test_traits_only", with_pool=True)
    with pytest.raises(ValueError, match="conditional_layer_norm=3"):
        keras_attn.build_transformer_model(
            dict(CONFIG), variant="test_traits_only", conditional_layer_norm=3
        )



def _head_input_and_logits(model, layer):
    """The input of head layer `layer` and the model's logits on `TOKENS`."""
    import keras

    inputs = {"token_ids": TOKENS}
    if "segment_ids" in model.input_contract.names:
        inputs["segment_ids"] = np.zeros_like(TOKENS)
    inner = keras.Model(model.input, model.get_layer(layer).input)
    return to_numpy(inner(inputs)), to_numpy(model(inputs))


def test_the_embedding_head_projects_as_the_config_says():
    """`head = "embedding"`: an untied config reads its own `MLM-Decoder`
    (RoFormer-v2's stayed tied before), a tied one with factorised
    embeddings maps back with `Output-Mapping` before the token embedding
    transposed (GPT's failed on shapes before); logits against numpy."""
    untied = keras_attn.build_transformer_model(
        dict(CONFIG, tie_word_embeddings=False), variant="roformer_v2", application="mlm"
    )
    hidden, logits = _head_input_and_logits(untied, "MLM-Decoder")
    kernel = to_numpy(untied.get_layer("MLM-Decoder").kernel)
    np.testing.assert_allclose(logits, hidden @ kernel, atol=1e-5)
    table = to_numpy(untied.get_layer("Embedding-Token").embeddings)
    assert np.abs(logits - hidden @ table.T).max() > 1e-3  # not the tied head
    factorised = keras_attn.build_transformer_model(
        dict(CONFIG, embedding_size=8), variant="gpt", application="lm"
    )
    hidden, logits = _head_input_and_logits(factorised, "Output-Mapping")
    mapping = to_numpy(factorised.get_layer("Output-Mapping").kernel)
    table = to_numpy(factorised.get_layer("Embedding-Token").embeddings)
    assert mapping.shape == (16, 8) and table.shape == (30, 8)
    np.testing.assert_allclose(logits, hidden @ mapping @ table.T, atol=1e-5)
