"""A Hugging Face BERT decoder (`BertLMHeadModel`, `is_decoder: true`)
against transformers: it loads as `application="lm"` by default, with the
same logits and greedy tokens; a decoder with cross-attention is refused."""

import json

import numpy as np
import pytest

import keras_attn
from tests.checkpoint_files import SMALL
from tests.checkpoint_files import perturb
from tests.harness import to_numpy

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

# Right-padded with BERT's pad id 0.
IDS = np.array([[2, 17, 40, 98, 5, 3], [2, 61, 7, 3, 0, 0]])
PROMPTS = [[2, 17, 40, 98], [2, 61], [2, 30, 8, 19, 21, 6]]


@pytest.fixture(scope="module")
def hf_decoder(tmp_path_factory):
    config = transformers.BertConfig(**SMALL, is_decoder=True)
    model = perturb(transformers.BertLMHeadModel(config), seed=5).eval()
    directory = tmp_path_factory.mktemp("hf_bert_decoder")
    model.save_pretrained(directory)
    saved = json.loads((directory / "config.json").read_text())
    assert saved["is_decoder"] is True and not saved.get("add_cross_attention", False)
    return model, directory


def test_bert_lm_head_model_loads_as_lm_with_equal_logits(hf_decoder):
    reference, directory = hf_decoder
    model = keras_attn.build_transformer_model(directory)
    assert model.application == "lm"
    logits = to_numpy(model({"token_ids": IDS, "segment_ids": np.zeros_like(IDS)}))
    with torch.no_grad():
        expected = reference(
            input_ids=torch.tensor(IDS), attention_mask=torch.tensor(IDS != 0).long()
        ).logits.numpy()
    real = IDS != 0
    np.testing.assert_allclose(logits[real], expected[real], atol=1e-4)
    # The bidirectional reading of the same weights differs: the mask matters.
    encoder = keras_attn.build_transformer_model(directory, application="mlm")
    bidirectional = to_numpy(encoder({"token_ids": IDS, "segment_ids": np.zeros_like(IDS)}))
    assert np.abs(bidirectional[real] - expected[real]).max() > 1e-2


def test_greedy_generation_equals_transformers_generate(hf_decoder):
    reference, directory = hf_decoder
    model = keras_attn.build_transformer_model(directory)
    tokens = model.generate(PROMPTS, 6)
    for prompt, row in zip(PROMPTS, tokens):
        with torch.no_grad():
            expected = reference.generate(
                torch.tensor([prompt]), max_new_tokens=6, do_sample=False,
                pad_token_id=0, eos_token_id=None,
            )[0, len(prompt):]
        assert row.tolist() == expected.tolist()


def test_a_decoder_with_cross_attention_is_refused_saying_why(hf_decoder, tmp_path):
    _, directory = hf_decoder
    config = json.loads((directory / "config.json").read_text())
    config["add_cross_attention"] = True
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    with pytest.raises(ValueError) as raised:
        keras_attn.build_transformer_model(str(path))
    message = str(raised.value)
    assert "add_cross_attention=True" in message and "config.json" in message
    assert "encoder's output" in message and "application='lm'" in message


def test_a_decoder_config_for_a_variant_without_lm_says_which_applications():
    config = dict(SMALL, is_decoder=True, mask_token_id=3)
    with pytest.raises(ValueError, match=r"is_decoder=True.*variant='tta'.*\['encoder', 'mlm'\]"):
        keras_attn.build_transformer_model(config, variant="tta")
    model = keras_attn.build_transformer_model(config, variant="tta", application="mlm")
    assert model.application == "mlm"
