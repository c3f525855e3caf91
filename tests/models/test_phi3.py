"""Phi-3 against transformers: logits with right and left padding on both
sides of LongRoPE's switch, greedy generation that crosses it (a single
prompt, an equal-length batch with an end token, a left-padded batch with
an end token, prompts on both sides of it) and beam search that crosses
it, the converter, and the configs this builder refuses.

One tiny random model, off the defaults: one key/value head under 3 query
heads (`qkv_proj`: 30 query, 10 key and 10 value columns),
`head_dim` 10, a window of 6, LongRoPE switched at
`original_max_position_embeddings` 8 with its attention factor from
`max_position_embeddings / original` = 4."""

import numpy as np
import pytest

import keras_attn
from keras_attn.models import load_config
from tests.checkpoint_files import assert_converted_like_transformers
from tests.checkpoint_files import perturb
from tests.harness import to_numpy

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
if not hasattr(transformers, "Phi3Config"):
    pytest.skip("this transformers has no Phi3Config", allow_module_level=True)

ORIGINAL = 8
SHORT = [1.0, 1.3, 2.0, 1.1, 3.0]
LONG = [2.0, 4.0, 6.0, 9.0, 15.0]
CONFIG = dict(
    vocab_size=99, hidden_size=30, intermediate_size=40, num_hidden_layers=2,
    num_attention_heads=3, num_key_value_heads=1, max_position_embeddings=32,
    original_max_position_embeddings=ORIGINAL, sliding_window=6, bos_token_id=1,
    eos_token_id=2, pad_token_id=0, rope_theta=500.0,
    rope_scaling=dict(type="su", short_factor=SHORT, long_factor=LONG,
                      original_max_position_embeddings=ORIGINAL),
)
IDS = np.array([[5, 17, 3, 44, 9, 28, 2, 61, 7, 12, 50], [7, 12, 50, 33, 8, 40, 9, 0, 0, 0, 0]])
LEFT_PROMPTS = [[5, 17, 3, 44], [7, 12], [30, 2, 8, 19, 21, 6]]


@pytest.fixture(scope="module")
def phi3(tmp_path_factory):
    """`(transformers model, its directory)`, saved once per module."""
    torch.manual_seed(0)
    model = transformers.Phi3ForCausalLM(transformers.Phi3Config(**CONFIG)).eval()
    model = perturb(model, seed=1).eval()
    generator = torch.Generator().manual_seed(7)
    with torch.no_grad():
        for key, parameter in model.named_parameters():
            if key.startswith("model.layers.") and parameter.ndim == 2:
                parameter.add_(0.4 * torch.randn(parameter.shape, generator=generator))
    model.config._attn_implementation = "eager"
    directory = tmp_path_factory.mktemp("phi3")
    model.save_pretrained(directory)
    return model, directory


@pytest.fixture(scope="module")
def ours(phi3):
    return keras_attn.build_transformer_model(phi3[1], padding_mask_input=True)


@pytest.fixture(scope="module")
def generating(phi3):
    return keras_attn.build_transformer_model(phi3[1])


@pytest.mark.parametrize("length", [ORIGINAL, ORIGINAL + 3], ids=["short", "long"])
@pytest.mark.parametrize("padding", ["right", "left"])
def test_logits_equal_transformers_on_both_sides_of_the_switch(phi3, ours, padding, length):
    reference, _ = phi3
    assert type(ours.template).__name__ == "Phi3"
    ids = IDS[:, :length]
    mask = (ids != 0).astype("int64")
    mask[0] = 1
    if padding == "left":
        ids, mask = ids.copy(), mask.copy()
        for row in range(len(ids)):
            real = int(mask[row].sum())
            ids[row] = np.concatenate([[0] * (length - real), ids[row, :real]])
            mask[row] = np.concatenate([[0] * (length - real), [1] * real])
    logits = to_numpy(ours({"token_ids": ids, "padding_mask": mask}))
    with torch.no_grad():
        expected = reference(torch.tensor(ids), attention_mask=torch.tensor(mask)).logits.numpy()
    real = mask.astype(bool)
    np.testing.assert_allclose(logits[real], expected[real], atol=1e-4)


def reference_generate(reference, prompts, steps, end=None):
    width = max(len(prompt) for prompt in prompts)
    ids = np.array([[0] * (width - len(p)) + p for p in prompts])
    mask = np.array([[0] * (width - len(p)) + [1] * len(p) for p in prompts])
    with torch.no_grad():
        return reference.generate(
            torch.tensor(ids), attention_mask=torch.tensor(mask), max_new_tokens=steps,
            do_sample=False, pad_token_id=0, eos_token_id=end,
        )[:, width:].tolist()


def until(row, end):
    row = list(row)
    return row[: row.index(end) + 1] if end in row else row


@pytest.mark.parametrize("prompt, steps", [
    ([5, 17, 3, 44, 9], 8),  # short, then the whole sequence again with the long factors
    ([5, 17, 3, 44, 9, 28, 2, 61, 7, 12], 4),  # long from the prompt on
], ids=["crossing", "long"])
def test_greedy_tokens_equal_transformers_across_the_switch(phi3, generating, monkeypatch,
                                                            prompt, steps):
    monkeypatch.setenv("KERAS_ATTN_TORCH_COMPILE", "0")
    tokens = generating.generate([prompt], steps)[0].tolist()
    assert tokens == reference_generate(phi3[0], [prompt], steps)[0]


def test_an_equal_length_batch_with_an_end_token_crosses_as_transformers(phi3, generating,
                                                                        monkeypatch):
    """Rows of one length cross the switch at the same step in both
    libraries; one row ends early."""
    monkeypatch.setenv("KERAS_ATTN_TORCH_COMPILE", "0")
    prompts, steps = [[5, 17, 3, 44, 9], [30, 2, 8, 19, 21]], 8
    free = generating.generate(prompts, steps).tolist()
    stop = next(i for i, token in enumerate(free[1]) if i >= 1 and token not in free[1][:i])
    end = free[1][stop]
    tokens = generating.generate(prompts, steps, end_token_id=end)
    assert len(until(tokens[1], end)) == stop + 1
    for ours, theirs in zip(tokens, reference_generate(phi3[0], prompts, steps, end)):
        assert until(ours, end) == until(theirs, end)


def test_a_left_padded_batch_equals_transformers_and_each_row_alone(phi3, generating,
                                                                    monkeypatch):
    """Within the original length a left-padded batch with an end token is
    transformers'; past it each row is encoded as transformers encodes it
    alone (transformers switches a batch at its longest row's length)."""
    monkeypatch.setenv("KERAS_ATTN_TORCH_COMPILE", "0")
    reference = phi3[0]
    first = generating.generate(LEFT_PROMPTS, 2).tolist()
    end = first[1][1]
    tokens = generating.generate(LEFT_PROMPTS, 2, end_token_id=end)
    for ours, theirs in zip(tokens, reference_generate(reference, LEFT_PROMPTS, 2, end)):
        assert until(ours, end) == until(theirs, end)
    # The short row ends at its first token; the others cross the switch.
    end = first[1][0]
    crossing = generating.generate(LEFT_PROMPTS, 6, end_token_id=end).tolist()
    assert [len(until(row, end)) for row in crossing] == [6, 1, 6]
    for prompt, row in zip(LEFT_PROMPTS, crossing):
        assert until(row, end) == until(reference_generate(reference, [prompt], 6, end)[0], end)


def test_a_batch_with_prompts_on_both_sides_of_the_switch_runs_each_row_as_alone(phi3,
                                                                            generating,
                                                                            monkeypatch):
    """A prompt past the original length beside one within it: the short
    row's prompt is encoded with the short factors and switches at its own
    length, as transformers generates each row alone (the prompt pass once
    encoded every row long when the longest prompt was)."""
    monkeypatch.setenv("KERAS_ATTN_TORCH_COMPILE", "0")
    prompts = [IDS[0, :ORIGINAL + 2].tolist(), [30, 2, 8]]
    for prompt, row in zip(prompts, generating.generate(prompts, 6).tolist()):
        assert row == reference_generate(phi3[0], [prompt], 6)[0]


def test_beam_search_across_the_switch_equals_transformers(phi3, generating, monkeypatch):
    """3 beams over two 5-token prompts for 8 steps, every hypothesis
    returned: the step at position 8 encodes each beam's sequence again
    with the long factors, as transformers' Phi-3 drops its cache for all
    beams there (the step's input then 9 tokens long). The end token is
    transformers' best beam's token from that step, so some hypotheses end
    at the switch and the rest run past it; tokens up to the end and
    length-normalised scores (1e-4) are transformers'."""
    monkeypatch.setenv("KERAS_ATTN_TORCH_COMPILE", "0")
    reference = phi3[0]
    prompts, steps, beams = [[5, 17, 3, 44, 9], [30, 2, 8, 19, 21]], 8, 3

    def theirs(end):
        with torch.no_grad():
            output = reference.generate(
                torch.tensor(prompts), attention_mask=torch.ones(2, 5, dtype=torch.long),
                max_new_tokens=steps, num_beams=beams, num_return_sequences=beams,
                do_sample=False, early_stopping=False, pad_token_id=0, eos_token_id=end,
                return_dict_in_generate=True, output_scores=True,
            )
        tokens = output.sequences[:, 5:].numpy().reshape(2, beams, -1)
        return tokens, output.sequences_scores.numpy().reshape(2, beams)

    end = int(theirs(None)[0][0, 0, ORIGINAL - 5 + 1])
    expected, expected_scores = theirs(end)
    sequences, scores = generating.generator.beam_search(
        prompts, steps, num_beams=beams, length_penalty=1.0, end_token_id=end
    )
    lengths = [len(until(row, end)) for row in sequences.reshape(2 * beams, -1).tolist()]
    assert min(lengths) <= ORIGINAL - 5 + 2 and max(lengths) == steps
    for ours, theirs_row in zip(sequences.reshape(2 * beams, -1), expected.reshape(2 * beams, -1)):
        assert until(ours, end) == until(theirs_row, end)
    np.testing.assert_allclose(scores, expected_scores, atol=1e-4)


def test_the_converter_checks_against_transformers_and_keeps_the_model(phi3, tmp_path, capsys):
    reference, directory = phi3
    assert_converted_like_transformers(
        reference, directory, tmp_path / "converted", capsys, IDS[:1]
    )


PHI3 = dict(CONFIG, model_type="phi3")


@pytest.mark.parametrize("fields, message", [
    (dict(PHI3, rope_scaling=dict(CONFIG["rope_scaling"], long_factor=LONG[:4])),
     r"`short_factor` and `long_factor` must have one number per rotated pair each; "
     r"received 5 and 4"),
    (dict(PHI3, rope_scaling=dict(CONFIG["rope_scaling"], short_factor=SHORT[:4],
                                  long_factor=LONG[:4])),
     r"d / 2 = 5 each; received short_factor=\[1.0, 1.3, 2.0, 1.1\]"),
    (dict(PHI3, rope_scaling=dict(CONFIG["rope_scaling"], short_factor="1.0")),
     r"`short_factor` must be a list of positive numbers.*received '1.0'"),
    (dict(PHI3, rope_scaling=dict(CONFIG["rope_scaling"], partial_rotary_factor=0.75)),
     r"`rope_scaling\['partial_rotary_factor'\]=0.75`"),
    (dict(PHI3, partial_rotary_factor=0.75), r"`partial_rotary_factor=0.75`: this builder"),
    (dict(vocab_size=99, hidden_size=30, num_hidden_layers=1, num_attention_heads=3,
          rope_scaling=dict(rope_type="longrope", short_factor=SHORT, long_factor=LONG)),
     r"rope_type 'longrope' needs .*missing \['original_max_position_embeddings'\]"),
])
def test_bad_phi3_configs_are_clear_errors(fields, message):
    with pytest.raises(ValueError, match=message):
        load_config(fields)
