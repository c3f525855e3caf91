"""Beam search with an end token against transformers' `generate`
(`num_beams`, `length_penalty`, `early_stopping` True, False and
"never"): the same tokens for every mode (issue 34, item 10)."""

import pytest

import keras_attn
from keras_attn.samplers import BeamSearch

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

GPT2 = dict(
    vocab_size=23, n_positions=40, n_embd=16, n_layer=1, n_head=2, resid_pdrop=0.0,
    embd_pdrop=0.0, attn_pdrop=0.0, bos_token_id=1, eos_token_id=1,
)
PROMPTS = [[5, 17, 3, 4], [7, 12], [13, 2, 8, 19, 21, 6]]
MAX_NEW_TOKENS = 6
# An end token some beams generate in the middle: with length_penalty 1 it
# separates transformers' search from one that keeps finished beams among
# the live ones (the second prompt).
END = 6


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    torch.manual_seed(0)
    hf_model = transformers.GPT2LMHeadModel(transformers.GPT2Config(**GPT2))
    with torch.no_grad():
        generator = torch.Generator().manual_seed(3)
        for parameter in hf_model.parameters():
            # Large weights: peaked, varied next-token distributions.
            parameter.add_(0.5 * torch.randn(parameter.shape, generator=generator))
    hf_model.eval()
    directory = tmp_path_factory.mktemp("gpt2_beams")
    hf_model.save_pretrained(directory)
    return hf_model, keras_attn.build_transformer_model(directory)


def transformers_beams(hf_model, prompt, early_stopping, length_penalty):
    with torch.no_grad():
        tokens = hf_model.generate(
            torch.tensor([prompt]), max_new_tokens=MAX_NEW_TOKENS, num_beams=4,
            do_sample=False, early_stopping=early_stopping, length_penalty=length_penalty,
            pad_token_id=0, eos_token_id=END,
        )[0, len(prompt):].tolist()
    return tokens + [0] * (MAX_NEW_TOKENS - len(tokens))


@pytest.mark.parametrize(
    "early_stopping, length_penalty",
    [(False, 1.0), (True, 1.0), ("never", 1.0), (False, 0.0), ("never", -1.0)],
)
def test_beam_tokens_equal_transformers_generate(models, early_stopping, length_penalty):
    hf_model, model = models
    search = BeamSearch(4, length_penalty=length_penalty, early_stopping=early_stopping)
    tokens = model.generate(PROMPTS, MAX_NEW_TOKENS, sampler=search, end_token_id=END)
    for prompt, row in zip(PROMPTS, tokens):
        assert row.tolist() == transformers_beams(hf_model, prompt, early_stopping, length_penalty)


def test_the_default_is_transformers_default(models):
    hf_model, model = models
    tokens = model.generate(
        PROMPTS, MAX_NEW_TOKENS, sampler=BeamSearch(4, length_penalty=1.0), end_token_id=END
    )
    expected = [transformers_beams(hf_model, prompt, False, 1.0) for prompt in PROMPTS]
    assert tokens.tolist() == expected


def test_keeping_finished_beams_is_another_search(models):
    """`"all_finished"`, the earlier search (finished beams stay among the
    live ones), returns another sequence for the second prompt: the tests
    above can tell the two apart."""
    hf_model, model = models
    search = BeamSearch(4, length_penalty=1.0, early_stopping="all_finished")
    tokens = model.generate(PROMPTS, MAX_NEW_TOKENS, sampler=search, end_token_id=END)
    assert tokens[1].tolist() != transformers_beams(hf_model, PROMPTS[1], False, 1.0)


@pytest.mark.parametrize("early_stopping", ["sometimes", 1, None])
def test_an_unknown_early_stopping_is_refused(early_stopping):
    with pytest.raises(ValueError, match=rf"early_stopping.*{early_stopping!r}"):
        BeamSearch(2, early_stopping=early_stopping)
