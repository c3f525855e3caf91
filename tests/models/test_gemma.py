"""Gemma, Gemma 2 and Gemma 3 (text) against transformers: logits with
right and left padding, greedy generation of a left-padded batch with an
end token, the converter, and the configs this builder refuses.

One tiny random model per family, off the defaults: one key/value head
under 4 query heads, `head_dim` 10 != 24 / 4, `query_pre_attn_scalar` 7
(not `head_dim`), caps small enough that `tanh` bends the scores and
logits, a window of 3 under prompts of up to 6 tokens and 6 generated
(and the 8 tokens of the logits' batch: the banded path), RoPE bases off
the defaults and a `linear` scaling on Gemma 3's global layers only."""

import numpy as np
import pytest

import keras_attn
from keras_attn.models import load_config
from tests.checkpoint_files import perturb
from tests.harness import to_numpy

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

COMMON = dict(
    num_hidden_layers=2, intermediate_size=40, bos_token_id=1, eos_token_id=2,
    vocab_size=99, hidden_size=24, num_attention_heads=4, num_key_value_heads=1, head_dim=10,
)
FAMILIES = {
    # An untied head, the legacy `hidden_act: "gelu"` (read as the tanh GELU).
    "gemma": ("GemmaConfig", "Gemma", dict(
        hidden_act="gelu", tie_word_embeddings=False,
        rope_parameters=dict(rope_type="default", rope_theta=500.0),
    )),
    # Layer 0 sliding (window 3), layer 1 global: Gemma2Config's default pattern.
    "gemma2": ("Gemma2Config", "Gemma2", dict(
        sliding_window=3, query_pre_attn_scalar=7, attn_logit_softcapping=2.0,
        final_logit_softcapping=3.0, rope_parameters=dict(rope_type="default", rope_theta=700.0),
    )),
    # Every second layer global (`sliding_window_pattern`), local RoPE base
    # 100, global 1000 scaled by 2, a final cap.
    "gemma3_text": ("Gemma3TextConfig", "Gemma3", dict(
        sliding_window=3, sliding_window_pattern=2, query_pre_attn_scalar=7,
        final_logit_softcapping=3.0, rope_theta=1000.0, rope_local_base_freq=100.0,
        rope_scaling=dict(rope_type="linear", factor=2.0),
    )),
}
IDS = np.array([[5, 17, 3, 44, 9, 28, 2, 61], [7, 12, 50, 33, 8, 0, 0, 0]])
RIGHT = np.array([[1] * 8, [1] * 5 + [0] * 3])
LEFT = RIGHT[:, ::-1].copy()
PROMPTS = [[5, 17, 3, 44], [7, 12], [30, 2, 8, 19, 21, 6]]
STEPS = 6


@pytest.fixture(scope="module", params=sorted(FAMILIES))
def family(request, tmp_path_factory):
    """`(name, transformers model, its directory)`, saved once per module."""
    name = request.param
    config_class, _, fields = FAMILIES[name]
    torch.manual_seed(0)
    config = getattr(transformers, config_class)(**COMMON, **fields)
    model = transformers.AutoModelForCausalLM.from_config(config, attn_implementation="eager")
    # Weights large enough that the next token depends on the context.
    model = perturb(model, seed=1).eval()
    generator = torch.Generator().manual_seed(7)
    with torch.no_grad():
        for key, parameter in model.named_parameters():
            if key.startswith("model.layers.") and parameter.ndim == 2:
                parameter.add_(0.4 * torch.randn(parameter.shape, generator=generator))
    directory = tmp_path_factory.mktemp(name)
    model.save_pretrained(directory)
    return name, model, directory


@pytest.fixture(scope="module")
def ours(family):
    return keras_attn.build_transformer_model(family[2], padding_mask_input=True)


@pytest.mark.parametrize("padding", ["right", "left"])
def test_logits_equal_transformers(family, ours, padding):
    name, reference, _ = family
    assert type(ours.template).__name__ == FAMILIES[name][1]
    assert ours.application == "lm"
    mask = RIGHT if padding == "right" else LEFT
    ids = np.where(mask == 1, IDS, 0) if padding == "right" else np.stack(
        [IDS[0], np.concatenate([[0] * 3, IDS[1, :5]])]
    )
    logits = to_numpy(ours({"token_ids": ids, "padding_mask": mask}))
    with torch.no_grad():
        expected = reference(torch.tensor(ids), attention_mask=torch.tensor(mask)).logits.numpy()
    real = mask.astype(bool)
    np.testing.assert_allclose(logits[real], expected[real], atol=1e-4)


def test_a_left_padded_batch_with_an_end_token_equals_transformers(family, monkeypatch):
    """transformers' `generate` on the prompts left-padded into one batch,
    past the window, with an end token that a row generates after its
    first step: each row's tokens up to its end token are ours."""
    monkeypatch.setenv("KERAS_ATTN_TORCH_COMPILE", "0")
    _, reference, directory = family
    model = keras_attn.build_transformer_model(directory)
    free = model.generate(PROMPTS, STEPS).tolist()
    ending, stop = next(
        (r, i) for r in range(len(free) - 1, -1, -1) for i, token in enumerate(free[r])
        if i >= 1 and token not in free[r][:i]
    )
    end = free[ending][stop]
    tokens = model.generate(PROMPTS, STEPS, end_token_id=end)
    width = max(len(prompt) for prompt in PROMPTS)
    ids = np.array([[0] * (width - len(p)) + p for p in PROMPTS])
    mask = np.array([[0] * (width - len(p)) + [1] * len(p) for p in PROMPTS])
    with torch.no_grad():
        expected = reference.generate(
            torch.tensor(ids), attention_mask=torch.tensor(mask),
            max_new_tokens=STEPS, do_sample=False, pad_token_id=0, eos_token_id=end,
        )[:, width:].numpy()

    def until_end(row):
        row = list(row)
        return row[: row.index(end) + 1] if end in row else row

    assert len(until_end(tokens[ending])) == stop + 1
    for ours, theirs in zip(tokens, expected):
        assert until_end(ours) == until_end(theirs)


def test_the_converter_checks_against_transformers_and_keeps_the_model(family, tmp_path, capsys):
    """`keras-attn-convert`: verified against `AutoModelForCausalLM`, and the
    written config and weights rebuild the same model (norms, caps, window,
    RoPE bases)."""
    from keras_attn.convert import main

    _, reference, directory = family
    output = str(tmp_path / "converted")
    assert main([str(directory), output, "--quiet"]) == 0
    assert "transformers.AutoModelForCausalLM's logits" in capsys.readouterr().out
    converted = keras_attn.build_transformer_model(
        f"{output}/config.json", f"{output}/model.weights.h5"
    )
    with torch.no_grad():
        expected = reference(torch.tensor(IDS[:1])).logits.numpy()
    np.testing.assert_allclose(to_numpy(converted({"token_ids": IDS[:1]})), expected, atol=1e-4)


GEMMA2 = dict(COMMON, model_type="gemma2", sliding_window=3)


@pytest.mark.parametrize("fields, message", [
    (dict(GEMMA2, attn_logit_softcapping=0.0),
     r"`attn_logit_softcapping` \(read as `attention_logit_soft_cap`\) must be a number in "
     r"\(0, inf\); received 0.0"),
    (dict(GEMMA2, final_logit_softcapping=-30.0),
     r"`final_logit_softcapping` \(read as `final_logit_soft_cap`\) must be .*received -30.0"),
    (dict(GEMMA2, layer_types=["sliding_attention", "chunked_attention"]),
     r"`layer_types` must be a list of \['sliding_attention', 'full_attention'\]; received "
     r"\['sliding_attention', 'chunked_attention'\]"),
    (dict(GEMMA2, use_bidirectional_attention=True),
     r"`use_bidirectional_attention=True`: this builder reads Gemma's causal decoders"),
    (dict(COMMON, model_type="gemma3_text", sliding_window_pattern=0),
     r"`sliding_window_pattern` must be a positive integer .*received 0"),
    (dict(COMMON, model_type="gemma3_text", rope_parameters={
        "sliding_attention": dict(rope_type="linear", factor=2.0, rope_theta=10.0)}),
     r"\['sliding_attention'\] has rope_type='linear'"),
    (dict(model_type="gemma3", text_config=COMMON),
     r"sets `model_type='gemma3'`; this builder reads \[.*'gemma3_text'.*\] checkpoints"),
])
def test_bad_gemma_configs_are_clear_errors(fields, message):
    with pytest.raises(ValueError, match=message):
        load_config(fields)
