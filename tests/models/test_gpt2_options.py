"""GPT-2 config options against transformers' GPT2LMHeadModel: an untied
head (`tie_word_embeddings: false`), and the attention options
`scale_attn_by_inverse_layer_idx` and `reorder_and_upcast_attn`."""

import json

import numpy as np
import pytest

import keras_attn
from tests.checkpoint_files import perturb
from tests.harness import to_numpy

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

SMALL = dict(
    vocab_size=53, n_positions=24, n_embd=16, n_layer=2, n_head=2,
    resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, bos_token_id=1, eos_token_id=1,
)
IDS = np.array([[5, 17, 3, 44, 9, 28], [7, 12, 50, 2, 0, 0]])
MASK = np.array([[1] * 6, [1, 1, 1, 1, 0, 0]])
PROMPTS = [[5, 17, 3], [7, 12]]


def save_gpt2(directory, seed, **options):
    torch.manual_seed(seed)
    config = transformers.GPT2Config(**SMALL, **options)
    model = perturb(transformers.GPT2LMHeadModel(config), seed=seed).eval()
    model.save_pretrained(directory)
    return model


def hf_logits(model, ids=IDS, mask=MASK):
    with torch.no_grad():
        return model(torch.tensor(ids), attention_mask=torch.tensor(mask)).logits.numpy()


def assert_logits_match(hf_model, directory, atol=1e-4):
    ours = keras_attn.build_transformer_model(directory, padding_mask_input=True)
    logits = to_numpy(ours({"token_ids": IDS, "padding_mask": MASK}))
    real = MASK.astype(bool)
    np.testing.assert_allclose(logits[real], hf_logits(hf_model)[real], atol=atol, rtol=0)


@pytest.fixture(scope="module")
def untied(tmp_path_factory):
    directory = tmp_path_factory.mktemp("gpt2_untied")
    model = save_gpt2(directory, seed=3, tie_word_embeddings=False)
    stored = json.loads((directory / "config.json").read_text())
    assert stored["tie_word_embeddings"] is False
    # The head really differs from the embedding: a tied model would be wrong.
    assert not torch.equal(model.lm_head.weight, model.transformer.wte.weight)
    return model, directory


def test_an_untied_head_is_loaded_not_tied(untied):
    assert_logits_match(*untied)


def test_an_untied_head_generates_as_transformers(untied):
    hf_model, directory = untied
    model = keras_attn.build_transformer_model(directory)
    tokens = model.generate(PROMPTS, 5)
    for prompt, row in zip(PROMPTS, tokens):
        with torch.no_grad():
            expected = hf_model.generate(
                torch.tensor([prompt]), max_new_tokens=5, do_sample=False,
                pad_token_id=0, eos_token_id=None,
            )[0, len(prompt):]
        assert row.tolist() == expected.tolist()


@pytest.mark.parametrize(
    "options",
    [
        dict(scale_attn_by_inverse_layer_idx=True),
        dict(reorder_and_upcast_attn=True),
        dict(scale_attn_by_inverse_layer_idx=True, reorder_and_upcast_attn=True),
    ],
    ids=["inverse_layer_idx", "reorder_and_upcast", "both"],
)
def test_attention_options_equal_transformers(tmp_path, options):
    hf_model = save_gpt2(tmp_path, seed=4, **options)
    hf_model.config._attn_implementation = "eager"  # where transformers reads the reordering
    assert_logits_match(hf_model, tmp_path)


def test_inverse_layer_scaling_changes_the_logits(tmp_path):
    """The option matters at these sizes: ignoring it would fail the test
    above."""
    hf_model = save_gpt2(tmp_path, seed=4, scale_attn_by_inverse_layer_idx=True)
    plain = transformers.GPT2LMHeadModel(
        transformers.GPT2Config(**SMALL)
    ).eval()
    plain.load_state_dict(hf_model.state_dict())
    difference = np.abs(hf_logits(hf_model) - hf_logits(plain))[MASK.astype(bool)].max()
    assert difference > 1e-2, difference


def test_a_size_given_as_a_string_names_the_file_and_its_key(tmp_path):
    config = dict(model_type="gpt2", **SMALL)
    config["n_embd"] = "16"
    (tmp_path / "config.json").write_text(json.dumps(config))
    with pytest.raises(ValueError) as raised:
        keras_attn.build_transformer_model(str(tmp_path / "config.json"))
    message = str(raised.value)
    assert "config.json" in message and "`n_embd`" in message and "'16'" in message
    assert "hidden_size" not in message.split("`n_embd`")[0]
