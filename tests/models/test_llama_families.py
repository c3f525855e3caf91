"""LLaMA, Mistral, Qwen2, Qwen3 and Gemma 1/2/3 against transformers: logits with right
and left padding, hidden states, greedy and beam generation (Mistral past
its sliding window), `yarn` rope scaling (Qwen2), `dynamic` in one pass
and at each cached step, the grouped-query cache's
size, and the configs this builder refuses.

One tiny random model per family, deliberately off the defaults: key/value
heads 1 and 2 under 4 or 6 query heads, `head_dim` other than
`hidden_size / heads` (LLaMA, Qwen3), tied and untied heads, odd
vocabularies, biases, a rope scaling, a window shorter than the prompts."""

import numpy as np
import pytest

import keras_attn
from keras_attn.generation.cached_forward import CachedForward
from tests.checkpoint_files import assert_converted_like_transformers
from tests.checkpoint_files import perturb
from tests.harness import to_numpy

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

COMMON = dict(num_hidden_layers=2, intermediate_size=40, bos_token_id=1, eos_token_id=2)
GEMMA_SHAPE = dict(
    vocab_size=99, hidden_size=24, num_attention_heads=4, num_key_value_heads=1, head_dim=10
)
FAMILIES = {
    # Multi-query attention, head_dim 8 != 24 / 4, every bias, a tied head,
    # Llama 3.1's rope scaling.
    "llama": ("LlamaConfig", "Llama", dict(
        vocab_size=99, hidden_size=24, num_attention_heads=4, num_key_value_heads=1,
        head_dim=8, attention_bias=True, mlp_bias=True, tie_word_embeddings=True,
        rope_parameters=dict(rope_type="llama3", rope_theta=500.0, factor=4.0,
                             low_freq_factor=1.0, high_freq_factor=4.0,
                             original_max_position_embeddings=8),
    )),
    # A window of 3 under prompts of up to 6 tokens and 6 more generated
    # (and under the 8 tokens of the logits' batch: the banded path);
    # linear position interpolation.
    "mistral": ("MistralConfig", "Mistral", dict(
        vocab_size=101, hidden_size=24, num_attention_heads=6, num_key_value_heads=2,
        sliding_window=3, rope_parameters=dict(rope_type="linear", rope_theta=10000.0, factor=2.0),
    )),
    # YaRN from 4 positions to 16 (every test sequence passes 4), with its
    # attention factor and `beta_fast` off the default.
    "qwen2": ("Qwen2Config", "Qwen2", dict(
        vocab_size=97, hidden_size=32, num_attention_heads=4, num_key_value_heads=2,
        max_position_embeddings=16,
        rope_parameters=dict(rope_type="yarn", rope_theta=1000.0, factor=4.0,
                             original_max_position_embeddings=4, beta_fast=16.0),
    )),
    # head_dim 10 != 24 / 6, one key/value head, biases, a tied head.
    "qwen3": ("Qwen3Config", "Qwen3", dict(
        vocab_size=99, hidden_size=24, num_attention_heads=6, num_key_value_heads=1,
        head_dim=10, attention_bias=True, tie_word_embeddings=True,
    )),
    # Gemma: one key/value head under 4 query heads, head_dim 10 != 24 / 4,
    # an untied head, the legacy `hidden_act: "gelu"` (read as the tanh GELU).
    "gemma": ("GemmaConfig", "Gemma", dict(
        GEMMA_SHAPE, hidden_act="gelu", tie_word_embeddings=False,
        rope_parameters=dict(rope_type="default", rope_theta=500.0),
    )),
    # Layer 0 sliding (window 3), layer 1 global (Gemma2Config's default
    # pattern); `query_pre_attn_scalar` 7 (not head_dim), caps small enough
    # that `tanh` bends the scores and the logits.
    "gemma2": ("Gemma2Config", "Gemma2", dict(
        GEMMA_SHAPE, sliding_window=3, query_pre_attn_scalar=7, attn_logit_softcapping=2.0,
        final_logit_softcapping=3.0, rope_parameters=dict(rope_type="default", rope_theta=700.0),
    )),
    # Every second layer global (`sliding_window_pattern`), local RoPE base
    # 100, global 1000 scaled by 2, a final cap.
    "gemma3_text": ("Gemma3TextConfig", "Gemma3", dict(
        GEMMA_SHAPE, sliding_window=3, sliding_window_pattern=2, query_pre_attn_scalar=7,
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
    # transformers' eager attention: its SDPA path cannot soft-cap (Gemma 2).
    model = transformers.AutoModelForCausalLM.from_config(config, attn_implementation="eager")
    # Weights large enough that the next token depends on the context: with
    # small block weights a tied head (LLaMA's, Qwen3's here) predicts the
    # token it was given, and greedy rows repeat one token.
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
    with an end token that a row generates after its first step (rows
    finish at different steps): each row's tokens up to its end token are
    ours."""
    monkeypatch.setenv("KERAS_ATTN_TORCH_COMPILE", "0")
    _, reference, directory = family
    model = keras_attn.build_transformer_model(directory)
    free = model.generate(PROMPTS, STEPS).tolist()
    # A token some row generates first after its first step.
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
    """`keras-attn-convert` on each family's folder: verified against
    `AutoModelForCausalLM`, and the written config and weights rebuild the
    same model (key/value heads, head_dim, rope scaling, window, norms)."""
    _, reference, directory = family
    assert_converted_like_transformers(
        reference, directory, tmp_path / "converted", capsys, IDS[:1]
    )


def test_greedy_generation_equals_transformers_generate(family, monkeypatch):
    """Prompts of three lengths in one batch (padded by `generate`); for
    Mistral, prompt and steps run past its window of 3. On torch the steps
    run eagerly: `torch.compile` of each family's step would cost about 20 s
    for 6 steps (tests/torch_runtime/test_compiled_step.py checks that the
    compiled step computes the eager one)."""
    monkeypatch.setenv("KERAS_ATTN_TORCH_COMPILE", "0")
    _, reference, directory = family
    model = keras_attn.build_transformer_model(directory)
    tokens = model.generate(PROMPTS, STEPS)
    # The sampling loop (top-k of 1: the argmax) reads the grouped-query
    # cache as the greedy one does.
    np.testing.assert_array_equal(
        model.generate(PROMPTS, STEPS, sampler=keras_attn.samplers.TopKSampler(1), seed=3), tokens
    )
    for prompt, row in zip(PROMPTS, tokens):
        with torch.no_grad():
            expected = reference.generate(
                torch.tensor([prompt]), attention_mask=torch.ones(1, len(prompt), dtype=torch.long),
                max_new_tokens=STEPS, do_sample=False, pad_token_id=0, eos_token_id=None,
            )[0, len(prompt):]
        assert row.tolist() == expected.tolist()


def test_encoder_equals_the_base_model(family):
    """`application="encoder"`: the last hidden state after the final norm."""
    _, reference, directory = family
    encoder = keras_attn.build_transformer_model(
        directory, application="encoder", padding_mask_input=True
    )
    hidden = to_numpy(encoder({"token_ids": IDS, "padding_mask": RIGHT}))
    with torch.no_grad():
        expected = reference.model(
            torch.tensor(IDS), attention_mask=torch.tensor(RIGHT)
        ).last_hidden_state.numpy()
    real = RIGHT.astype(bool)
    np.testing.assert_allclose(hidden[real], expected[real], atol=1e-5)


def small_llama(**fields):
    config = dict(
        vocab_size=31, hidden_size=32, num_hidden_layers=1,
        num_attention_heads=8, intermediate_size=16,
    )
    config.update({"model_type": "llama", **fields})
    return keras_attn.build_transformer_model(config)


def cache_bytes(model, batch=2, capacity=10):
    cache = CachedForward(model).empty_cache(batch, capacity)
    return sum(
        to_numpy(part).nbytes for layer in cache.layers for part in (layer.keys, layer.values)
    )


@pytest.mark.parametrize("key_value_heads", [1, 2, 4])
def test_grouped_query_cache_holds_only_the_key_value_heads(key_value_heads):
    full = cache_bytes(small_llama())
    grouped = small_llama(num_key_value_heads=key_value_heads)
    assert cache_bytes(grouped) * 8 == full * key_value_heads
    attention = grouped.get_layer("Transformer-0-MultiHeadSelfAttention")
    assert attention.key_dense.kernel.shape == (32, key_value_heads * 4)
    assert attention.value_dense.kernel.shape == (32, key_value_heads * 4)


@pytest.mark.parametrize("fields, message", [
    (dict(num_key_value_heads=3),
     r"num_attention_heads=8 is not a multiple of num_key_value_heads=3"),
    (dict(num_key_value_heads=0), r"`num_key_value_heads` must be an integer >= 1"),
    (dict(rope_scaling={"rope_type": "longer", "factor": 2.0}), r"Unknown `rope_type` 'longer'"),
    (dict(attention_bias="yes"), r"`attention_bias` must be true or false"),
    (dict(head_dim=2.5), r"`head_dim` \(read as `attention_head_size`\) must be an integer"),
    (dict(mlp_bias=None, attention_bias=1), r"`attention_bias` must be true or false"),
    (dict(mlp_bias="no"), r"`mlp_bias` must be true or false"),
    (dict(model_type="mistral", sliding_window=0),
     r"`sliding_window` \(read as `attention_window`\) must be an integer >= 1"),
    (dict(model_type="qwen2", layer_types=["local"]),
     r"`layer_types` must be a list of \['sliding_attention', 'full_attention'\]"),
    (dict(model_type="qwen2", layer_types=["local"], sliding_window=4),
     r"`layer_types` must be a list of"),
    # As transformers' Qwen2Config and Qwen3Config refuse them: "false" read
    # as true windowed every layer, 1 and 1.5 were read, "1" a bare TypeError.
    (dict(model_type="qwen2", use_sliding_window="false", sliding_window=4),
     r"A qwen2 config's `use_sliding_window` must be true or false; received 'false' \(str\)"),
    (dict(model_type="qwen3", use_sliding_window=1, sliding_window=4),
     r"A qwen3 config's `use_sliding_window` must be true or false; received 1 \(int\)"),
    (dict(model_type="qwen2", use_sliding_window=True, sliding_window=4, max_window_layers=1.5),
     r"`max_window_layers` \(the first layer with the window\) must be an integer; "
     r"received 1.5 \(float\)"),
    (dict(model_type="qwen3", use_sliding_window=True, sliding_window=4, max_window_layers="1"),
     r"`max_window_layers` .*must be an integer; received '1' \(str\)"),
    (dict(model_type="qwen2", max_window_layers=True), r"received True \(bool\)"),
    # RoPE's width, checked when the config is read (it failed at the first
    # call, naming `key_size`).
    (dict(head_dim=7), r"rotate query/key features in pairs and need an even query/key "
     r"width d; received `head_dim` \(read as `attention_head_size`\)=7"),
    (dict(hidden_size=28, num_attention_heads=4),
     r"need an even query/key width d; received `hidden_size`=28 / `num_attention_heads`=4 = 7"),
    (dict(hidden_size=8, num_attention_heads=4, rope_scaling={"rope_type": "dynamic", "factor": 2.0}),
     r"rope_type 'dynamic' raises the base to the power d / \(d - 2\) and needs a rotary width "
     r"d > 2; received `hidden_size`=8 / `num_attention_heads`=4 = 2"),
    (dict(model_type="qwen3", layer_types="full_attention", sliding_window=4),
     r"A qwen3 config's `layer_types` must be a list, one entry per layer; received "
     r"'full_attention' \(str\)"),
])
def test_bad_llama_config_values_are_clear_errors(fields, message):
    with pytest.raises(ValueError, match=message):
        small_llama(**fields)


@pytest.fixture(scope="module")
def dynamic(tmp_path_factory):
    """`(transformers model, its directory)`: a LLaMA under `dynamic` rope
    scaling from an original length of 4 (`max_position_embeddings`)."""
    config = transformers.LlamaConfig(
        **COMMON, vocab_size=53, hidden_size=16, num_attention_heads=4, num_key_value_heads=2,
        max_position_embeddings=4,
        rope_parameters=dict(rope_type="dynamic", rope_theta=10000.0, factor=2.0),
    )
    torch.manual_seed(0)
    reference = perturb(transformers.LlamaForCausalLM(config), seed=2).eval()
    directory = tmp_path_factory.mktemp("dynamic")
    reference.save_pretrained(directory)
    return reference, directory


def test_dynamic_rope_scaling_equals_transformers_past_the_original_length(dynamic, monkeypatch):
    """`dynamic` grows the base with the length encoded: 8 tokens past an
    original length of 4 in one pass, and cached generation from 3 tokens
    to 11, where each step rotates its query and key with the base of the
    length so far (`n + 1` at position `n`) and the cache keeps what earlier
    steps rotated, as transformers' `generate` does."""
    reference, directory = dynamic
    model = keras_attn.build_transformer_model(directory)
    assert model.template.config.rope_scaling["rope_type"] == "dynamic"
    ids = IDS[:, :8] % 53
    with torch.no_grad():
        expected = reference(torch.tensor(ids)).logits.numpy()
    np.testing.assert_allclose(to_numpy(model({"token_ids": ids})), expected, atol=1e-4)
    # Each cached step's logits against transformers' (a full pass over the
    # whole prefix, with one base for every position, differs by 2.6e-3).
    with torch.no_grad():
        generated = reference.generate(
            torch.tensor(ids[:1, :3]), attention_mask=torch.ones(1, 3, dtype=torch.long),
            max_new_tokens=8, do_sample=False, pad_token_id=0, eos_token_id=None,
            return_dict_in_generate=True, output_logits=True,
        )
    tokens = generated.sequences.numpy()
    expected = np.stack([step.numpy()[0] for step in generated.logits])
    forward = CachedForward(model)
    logits, cache = forward(tokens[:, :3], 0, forward.empty_cache(1, forward.capacity(3, 11)))
    steps = [to_numpy(logits)[0, -1]]
    for position in range(3, 10):
        logits, cache = forward(tokens[:, position : position + 1], position, cache)
        steps.append(to_numpy(logits)[0, 0])
    np.testing.assert_allclose(np.stack(steps), expected, atol=1e-4)
    full = to_numpy(model({"token_ids": tokens[:, :10]}))[0, 2:]
    assert np.abs(full - expected).max() > 1e-3
    monkeypatch.setenv("KERAS_ATTN_TORCH_COMPILE", "0")
    assert model.generate(tokens[:, :3].tolist(), 8)[0].tolist() == tokens[0, 3:].tolist()


def test_dynamic_generate_equals_transformers_generate_for_one_prompt(dynamic, monkeypatch):
    """`generate` and `beam_search` of one 3-token prompt under `dynamic`
    (original length 4) score as transformers' `generate` (1e-4): the prompt
    pass encodes the prompt's own 3 positions, not its bucket of 8 (padding
    it to 8 grew the base of the prompt's keys: 1.5e-2 in the logits)."""
    monkeypatch.setenv("KERAS_ATTN_TORCH_COMPILE", "0")
    reference, directory = dynamic
    model = keras_attn.build_transformer_model(directory)
    prompt = [[7, 12, 50]]
    with torch.no_grad():
        greedy = reference.generate(
            torch.tensor(prompt), attention_mask=torch.ones(1, 3, dtype=torch.long),
            max_new_tokens=6, do_sample=False, pad_token_id=0, eos_token_id=None,
            return_dict_in_generate=True, output_logits=True,
        )
        beams = reference.generate(
            torch.tensor(prompt), attention_mask=torch.ones(1, 3, dtype=torch.long),
            max_new_tokens=6, num_beams=2, do_sample=False, early_stopping=False,
            pad_token_id=0, eos_token_id=None, return_dict_in_generate=True,
            output_scores=True,
        )
    tokens = greedy.sequences[0, 3:].numpy()
    log_probabilities = torch.log_softmax(torch.stack(greedy.logits)[:, 0].double(), -1)
    greedy_score = log_probabilities[np.arange(6), tokens].sum().item()
    assert model.generate(prompt, 6)[0].tolist() == tokens.tolist()
    # One beam is greedy decoding, scored by its summed log-probabilities.
    sequences, scores = model.generator.beam_search(prompt, 6, num_beams=1)
    assert sequences[0, 0].tolist() == tokens.tolist()
    np.testing.assert_allclose(scores[0, 0], greedy_score, atol=1e-4)
    sequences, scores = model.generator.beam_search(prompt, 6, num_beams=2, length_penalty=1.0)
    assert sequences[0, 0].tolist() == beams.sequences[0, 3:].tolist()
    np.testing.assert_allclose(scores[0, 0], beams.sequences_scores[0].item(), atol=1e-4)


def test_dynamic_rope_scaling_ignores_an_original_length_as_transformers_does(tmp_path):
    """transformers' dynamic RoPE takes `max_position_embeddings` (8) as the
    original length and ignores the scaling's
    `original_max_position_embeddings` (4): so does a folder read here,
    with a warning naming both (reading 4 made the logits differ by 0.48)."""
    config = transformers.LlamaConfig(
        **COMMON, vocab_size=53, hidden_size=16, num_attention_heads=4, num_key_value_heads=2,
        max_position_embeddings=8,
        rope_parameters=dict(rope_type="dynamic", rope_theta=10000.0, factor=2.0,
                             original_max_position_embeddings=4),
    )
    torch.manual_seed(0)
    reference = perturb(transformers.LlamaForCausalLM(config), seed=2).eval()
    reference.save_pretrained(tmp_path)
    with pytest.warns(UserWarning, match=r"original_max_position_embeddings=4, but "
                      r"transformers' dynamic RoPE ignores that key and takes "
                      r"max_position_embeddings=8"):
        model = keras_attn.build_transformer_model(tmp_path)
    assert model.template.config.rope_scaling["original_max_position_embeddings"] == 8
    ids = np.concatenate([IDS, IDS[:, :4]], axis=1)[:1] % 53  # 12 tokens, past 8
    with torch.no_grad():
        expected = reference(torch.tensor(ids)).logits.numpy()
    np.testing.assert_allclose(to_numpy(model({"token_ids": ids})), expected, atol=1e-4)


def test_qwen_window_in_some_layers_equals_transformers(tmp_path, monkeypatch):
    """`use_sliding_window` with `max_window_layers=1`: layer 0 attends to
    every earlier token, layer 1 within 3 (transformers' `layer_types`).
    Logits of 8 tokens and greedy generation past the window equal
    transformers'; the decoding cache keeps every position and each layer
    masks its own band."""
    config = transformers.Qwen2Config(
        **COMMON, vocab_size=61, hidden_size=16, num_attention_heads=4, num_key_value_heads=2,
        use_sliding_window=True, sliding_window=3, max_window_layers=1,
    )
    assert config.layer_types == ["full_attention", "sliding_attention"]
    torch.manual_seed(0)
    reference = perturb(transformers.Qwen2ForCausalLM(config), seed=3).eval()
    reference.save_pretrained(tmp_path)
    model = keras_attn.build_transformer_model(tmp_path)
    windows = [model.get_layer(f"Transformer-{i}-MultiHeadSelfAttention").attention_window
               for i in range(2)]
    assert windows == [None, 3]
    ids = IDS[:1] % 61
    with torch.no_grad():
        expected = reference(torch.tensor(ids)).logits.numpy()
    np.testing.assert_allclose(to_numpy(model({"token_ids": ids})), expected, atol=1e-4)
    # Each layer's window is in play at 8 tokens: without it, or with it in
    # both layers (`layer_types` overrides the folder's), the logits differ.
    for kinds in (["full_attention"] * 2, ["sliding_attention"] * 2):
        other = keras_attn.build_transformer_model(tmp_path, layer_types=kinds)
        assert np.abs(to_numpy(other({"token_ids": ids})) - expected).max() > 1e-3, kinds
    monkeypatch.setenv("KERAS_ATTN_TORCH_COMPILE", "0")
    forward = CachedForward(model)
    assert forward.capacity(4, 12) == 12  # every position
    tokens = model.generate(PROMPTS, STEPS)
    for prompt, row in zip(PROMPTS, tokens):
        with torch.no_grad():
            expected = reference.generate(
                torch.tensor([prompt]),
                attention_mask=torch.ones(1, len(prompt), dtype=torch.long),
                max_new_tokens=STEPS, do_sample=False, pad_token_id=0, eos_token_id=None,
            )[0, len(prompt):]
        assert row.tolist() == expected.tolist()


def test_a_layer_types_override_on_a_mistral_folder_is_honoured(tmp_path):
    """transformers' Mistral ignores a config file's `layer_types` (so does
    this builder), but `layer_types=` given to the builder is the user's:
    the layers attend as it says, equal to transformers' Ministral (Mistral
    with `layer_types`) on the same weights; without it the window is in
    every layer, as in the folder's `MistralForCausalLM`."""
    fields = dict(**COMMON, vocab_size=61, hidden_size=24, num_attention_heads=6,
                  num_key_value_heads=2, head_dim=4, sliding_window=3)
    kinds = ["full_attention", "sliding_attention"]
    torch.manual_seed(0)
    mistral = perturb(transformers.MistralForCausalLM(transformers.MistralConfig(**fields)),
                      seed=5).eval()
    mistral.config.layer_types = ["full_attention"] * 2  # in the file, not read
    mistral.save_pretrained(tmp_path)
    ministral = transformers.MinistralForCausalLM(
        transformers.MinistralConfig(**fields, layer_types=kinds)
    ).eval()
    ministral.load_state_dict(mistral.state_dict())
    ids = torch.tensor(IDS[:1] % 61)
    with torch.no_grad():
        folder_logits = mistral(ids).logits.numpy()
        overridden_logits = ministral(ids).logits.numpy()
    assert np.abs(folder_logits - overridden_logits).max() > 1e-3
    model = keras_attn.build_transformer_model(tmp_path)
    np.testing.assert_allclose(to_numpy(model({"token_ids": IDS[:1] % 61})), folder_logits,
                               atol=1e-4)
    model = keras_attn.build_transformer_model(tmp_path, layer_types=kinds)
    windows = [model.get_layer(f"Transformer-{i}-MultiHeadSelfAttention").attention_window
               for i in range(2)]
    assert windows == [None, 3]
    np.testing.assert_allclose(to_numpy(model({"token_ids": IDS[:1] % 61})), overridden_logits,
                               atol=1e-4)


def test_grouped_query_attention_layer_checks_its_heads():
    with pytest.raises(ValueError, match=r"heads=6 and key_value_heads=4"):
        keras_attn.MultiHeadAttention(heads=6, head_size=4, key_value_heads=4)


def test_beam_search_equals_transformers_best_beam(family, monkeypatch):
    """4 beams, no end token: both searches keep every beam to the last
    step and return the highest-scoring one (as tests/models/test_gpt2.py),
    with the same score (1e-4)."""
    monkeypatch.setenv("KERAS_ATTN_TORCH_COMPILE", "0")
    _, reference, directory = family
    model = keras_attn.build_transformer_model(directory)
    # transformers' default length penalty (this library's is 0).
    sequences, scores = model.generator.beam_search(PROMPTS, 4, num_beams=4, length_penalty=1.0)
    for prompt, row, score in zip(PROMPTS, sequences[:, 0], scores[:, 0]):
        with torch.no_grad():
            expected = reference.generate(
                torch.tensor([prompt]), attention_mask=torch.ones(1, len(prompt), dtype=torch.long),
                max_new_tokens=4, num_beams=4, do_sample=False, early_stopping=False,
                pad_token_id=0, eos_token_id=None, return_dict_in_generate=True,
                output_scores=True,
            )
        assert row.tolist() == expected.sequences[0, len(prompt):].tolist()
        # The best beam's length-normalised log-probability.
        np.testing.assert_allclose(score, expected.sequences_scores[0].item(), atol=1e-4)


def test_int8_quantized_llama_stays_close():
    """`model.quantize("int8")` passes over the weightless rotary sublayer
    (it refused rotary models as an unbuilt layer before)."""
    model = small_llama(num_key_value_heads=2)
    ids = np.array([[5, 6, 7, 8, 9]])
    before = to_numpy(model({"token_ids": ids}))
    model.quantize("int8")
    after = to_numpy(model({"token_ids": ids}))
    assert np.abs(after - before).max() < 0.05 * np.abs(before).max()
