"""LoRA, int8 and `.keras` files on the GPT-2 and T5 families, and LoRA on
LLaMA: adapters on every projection (T5's cross-attention, the gated
feed-forwards and LLaMA's grouped-query keys and values included) and only
they train; generation with adapters is the greedy argmax of the full
pass; merged adapters and int8 weights keep the outputs; a saved model
reloads with the same outputs and tokens."""

import keras
import numpy as np
import pytest

import keras_attn
from keras_attn import lora
from tests.harness import supports_jit
from tests.harness import to_numpy
from tests.models.test_lora import adapter_variables
from tests.models.test_lora import randomize_adapters
from tests.models.test_quantize import RELATIVE_TOLERANCE
from tests.models.test_quantize import quantize

RANK = 4
MAX_NEW_TOKENS = 4
# Large weights (as in test_quantize), so that every layer shows in the
# outputs; no pad id in GPT-2's vocabulary, as in Hugging Face's.
GPT2 = dict(
    vocab_size=50, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
    intermediate_size=32, max_position_embeddings=32, pad_token_id=None,
    initializer_range=0.2,
)
# T5 v1.1: an untied head and a gated feed-forward (`gate_dense`). A dict
# config names no family, so the decoder's start token is given here.
T5 = dict(
    vocab_size=50, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
    intermediate_size=32, attention_head_size=8, tie_word_embeddings=False,
    feed_forward_gated=True, decoder_start_token_id=0, initializer_range=0.2,
)
# LLaMA with one key/value head under two query heads: its key and value
# projections are 8 wide, not 16. (int8 and `.keras` files of the LLaMA
# layout: tests/models/test_llama_families.py and the model harness.)
LLAMA = dict(
    vocab_size=50, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
    num_key_value_heads=1, intermediate_size=32, initializer_range=0.2,
)
FAMILIES = {"gpt2": (GPT2, "gpt2"), "t5": (T5, "t5.1.1"), "llama": (LLAMA, "llama")}
LORA_ONLY = ("llama",)
# GPT-2's and LLaMA's prompts (of two lengths); T5's sources.
PROMPTS = {
    "gpt2": [[3, 4, 5, 1], [7, 2]], "t5": [[3, 4, 5, 1], [9, 8, 2, 1]],
    "llama": [[3, 4, 5, 1], [7, 2]],
}
# A batch for full passes, of the shapes `greedy_full_pass` runs (JAX's
# eager ops compile once per shape): T5's source and target of different
# lengths, the second source padded.
INPUTS = {
    "gpt2": {"token_ids": np.array([[3, 4, 5, 1, 9, 12, 0, 33], [7, 2, 30, 0, 41, 6, 8, 1]], "int32")},
    "llama": {"token_ids": np.array([[3, 4, 5, 1, 9, 12, 0, 33], [7, 2, 30, 0, 41, 6, 8, 1]], "int32")},
    "t5": {
        "encoder_token_ids": np.array([[3, 4, 5, 1], [9, 8, 0, 0]], "int32"),
        "decoder_token_ids": np.array([[0, 6, 2, 17, 5], [0, 11, 40, 3, 3]], "int32"),
    },
}
# Rank-4 adapters on 16-wide projections (T5's 2 heads of 8), 32 inner:
# rank * (d_in + d_out) per adapted kernel.
ATTENTION = 4 * RANK * (16 + 16)
FEED_FORWARD = 2 * RANK * (16 + 32)  # intermediate and output
GATE = RANK * (16 + 32)
ADAPTER_WEIGHTS = {
    "gpt2": 2 * (ATTENTION + FEED_FORWARD),
    # Encoder blocks: self-attention and gated feed-forward; decoder
    # blocks: self-attention, cross-attention and gated feed-forward.
    "t5": 2 * (ATTENTION + FEED_FORWARD + GATE) + 2 * (2 * ATTENTION + FEED_FORWARD + GATE),
    # Queries and outputs 16 -> 16, keys and values 16 -> 8 (one head).
    "llama": 2 * (2 * RANK * (16 + 16) + 2 * RANK * (16 + 8) + FEED_FORWARD + GATE),
}
# Adapted projections: GPT-2 2 x (4 + 2); T5 2 x (4 + 3) + 2 x (4 + 4 + 3).
ADAPTED_PROJECTIONS = {"gpt2": 12, "t5": 36, "llama": 14}


@pytest.fixture(scope="module")
def base_weights():
    """Each family's random weights, drawn once: every test's model starts
    from them (`copy_of`)."""
    keras.utils.set_random_seed(0)
    return {family: build(family).get_weights() for family in FAMILIES}


def build(family):
    config, variant = FAMILIES[family]
    return keras_attn.build_transformer_model(config, variant=variant)


def copy_of(family, base_weights):
    model = build(family)
    model.set_weights(base_weights[family])
    return model


def adapted_copy(family, base_weights):
    """The base model with rank-4 adapters on every projection, given
    random values (LoRA's `B` starts at zero)."""
    model = copy_of(family, base_weights)
    lora.enable_lora(model, RANK, feed_forward=True)
    randomize_adapters(model, seed=1)
    return model


def greedy_full_pass(model, family, prompts, max_new_tokens=MAX_NEW_TOKENS):
    """Greedy decoding by the full forward pass, no cache: GPT-2 runs on
    each prompt plus the tokens so far; T5 encodes the sources and runs the
    decoder on `[start] + generated so far`. Each step appends the argmax
    of the logits at each row's last token.

    Both are causal, so tokens after a row's last one cannot change its
    logits: the rows sit in one buffer of one width (zeros after each row),
    one shape for every step, so that JAX compiles its eager ops once, not
    once per step. (T5's sources have one length: nothing is padded.)"""
    if family != "t5":
        rows = [list(prompt) for prompt in prompts]
    else:
        rows = [[T5["decoder_start_token_id"]] for _ in prompts]
    width = max(len(row) for row in rows) + max_new_tokens
    for _ in range(max_new_tokens):
        buffer = np.zeros((len(rows), width), "int32")
        for index, row in enumerate(rows):
            buffer[index, : len(row)] = row
        if family != "t5":
            inputs = {"token_ids": buffer}
        else:
            inputs = {"encoder_token_ids": np.array(prompts, "int32"), "decoder_token_ids": buffer}
        logits = to_numpy(model(inputs))
        for index, row in enumerate(rows):
            row.append(int(np.argmax(logits[index, len(row) - 1])))
    return np.array([row[-max_new_tokens:] for row in rows])


def targets(family):
    ids = INPUTS[family]["decoder_token_ids" if family == "t5" else "token_ids"]
    return np.roll(ids, -1, axis=1)


@pytest.mark.parametrize("family", FAMILIES)
def test_lora_adapts_every_projection_and_trains_only_adapters(family, base_weights):
    model = copy_of(family, base_weights)
    inputs = INPUTS[family]
    expected = to_numpy(model(inputs))

    added = lora.enable_lora(model, RANK, feed_forward=True)

    assert added == ADAPTER_WEIGHTS[family]
    paths = {v.path.rsplit("/", 1)[0] for v in adapter_variables(model)}
    if family == "t5":
        assert "Decoder-Transformer-1-MultiHeadCrossAttention/key_dense" in paths
        assert "Encoder-Transformer-0-FeedForward/gate_dense" in paths
        assert "Decoder-Transformer-1-FeedForward/gate_dense" in paths
    if family == "llama":
        for projection in ("key_dense", "value_dense"):
            kernel = model.get_layer("Transformer-1-MultiHeadSelfAttention")
            assert getattr(kernel, projection).lora_kernel_b.shape[-1] == 8
    trainable = model.trainable_variables
    assert trainable and all("lora_kernel" in v.path for v in trainable)
    # `B` starts at zero: the adapted model computes the base model (to
    # float rounding: torch may multiply by the rebuilt kernel another way).
    np.testing.assert_allclose(to_numpy(model(inputs)), expected, atol=1e-5)

    model.compile(
        optimizer=keras.optimizers.SGD(learning_rate=0.5),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        jit_compile=supports_jit(),
    )
    # `weights`, not `variables`: dropout's seed states move in any fit step.
    before = {v.path: to_numpy(v).copy() for v in model.weights}
    model.fit(inputs, targets(family), batch_size=2, epochs=1, verbose=0)
    changed = {v.path for v in model.weights if not np.array_equal(before[v.path], to_numpy(v))}
    assert changed and all("lora_kernel" in path for path in changed)
    assert any("lora_kernel_b" in path for path in changed)
    assert np.abs(to_numpy(model(inputs)) - expected).max() > 1e-4


def eager_torch_steps_for_lora_only(family, monkeypatch):
    """GPT-2 and T5 check the compiled torch step with adapters; LLaMA's
    steps run eagerly (its `torch.compile` would add about 25 s)."""
    if family in LORA_ONLY:
        monkeypatch.setenv("KERAS_ATTN_TORCH_COMPILE", "0")


@pytest.mark.parametrize("family", FAMILIES)
def test_generate_with_adapters_is_greedy_over_the_full_pass(family, base_weights, monkeypatch):
    eager_torch_steps_for_lora_only(family, monkeypatch)
    model = adapted_copy(family, base_weights)
    base = copy_of(family, base_weights)
    inputs = INPUTS[family]
    assert np.abs(to_numpy(model(inputs)) - to_numpy(base(inputs))).max() > 1e-3  # adapters matter
    generated = model.generate(PROMPTS[family], MAX_NEW_TOKENS)
    np.testing.assert_array_equal(generated, greedy_full_pass(model, family, PROMPTS[family]))


@pytest.mark.parametrize("family", FAMILIES)
def test_merged_adapters_keep_outputs_and_tokens(family, base_weights, monkeypatch):
    eager_torch_steps_for_lora_only(family, monkeypatch)
    model = adapted_copy(family, base_weights)
    inputs = INPUTS[family]
    expected = to_numpy(model(inputs))
    # The adapted model's greedy tokens (which its own `generate` gives:
    # test_generate_with_adapters_is_greedy_over_the_full_pass).
    tokens = greedy_full_pass(model, family, PROMPTS[family])

    assert lora.merge_lora(model) == ADAPTED_PROJECTIONS[family]
    assert not adapter_variables(model)
    np.testing.assert_allclose(to_numpy(model(inputs)), expected, atol=1e-5)
    np.testing.assert_array_equal(model.generate(PROMPTS[family], MAX_NEW_TOKENS), tokens)


@pytest.mark.parametrize("family", [f for f in FAMILIES if f not in LORA_ONLY])
def test_int8_keeps_outputs_close_and_generates(family, base_weights):
    model = copy_of(family, base_weights)
    inputs = INPUTS[family]
    expected = to_numpy(model(inputs))

    quantize(model)

    assert model.get_layer("Embedding-Token").quantization_mode == "int8"
    prefix = "Transformer-0" if family == "gpt2" else "Decoder-Transformer-0"
    feed_forward = model.get_layer(f"{prefix}-FeedForward")
    projections = [feed_forward.intermediate_dense, feed_forward.output_dense]
    if family == "t5":
        projections.append(feed_forward.gate_dense)
        cross = model.get_layer(f"{prefix}-MultiHeadCrossAttention")
        projections += [cross.query_dense, cross.key_dense, cross.value_dense, cross.output_dense]
        projections.append(model.get_layer("Decoder-Output-LM"))
    for dense in projections:
        assert dense.quantization_mode == "int8", dense.path
    quantized = to_numpy(model(inputs))
    assert np.all(np.isfinite(quantized))
    # test_quantize's tolerance (a few percent; a forgotten scale is off by
    # ~100x), on the root-mean-square error: T5's two stacks put 4 blocks
    # and the head between the embedding and the logits, and the largest
    # single error of those logits reaches 6% on some backends' weights.
    error = np.linalg.norm(quantized - expected) / np.linalg.norm(expected)
    assert 0 < error < RELATIVE_TOLERANCE

    generated = model.generate(PROMPTS[family], MAX_NEW_TOKENS)
    assert generated.shape == (2, MAX_NEW_TOKENS)
    # The cached loop computes what the quantized full pass computes.
    np.testing.assert_array_equal(generated, greedy_full_pass(model, family, PROMPTS[family]))


@pytest.mark.parametrize("family", [f for f in FAMILIES if f not in LORA_ONLY])
def test_keras_file_round_trip(family, base_weights, tmp_path):
    model = copy_of(family, base_weights)
    inputs = INPUTS[family]
    path = str(tmp_path / f"{family}.keras")
    model.save(path)
    loaded = keras.saving.load_model(path)

    assert isinstance(loaded, keras_attn.TransformerModel)
    np.testing.assert_array_equal(to_numpy(loaded(inputs)), to_numpy(model(inputs)))
    # The saved model's greedy tokens, by the full pass (one compiled loop,
    # the loaded model's, instead of two).
    np.testing.assert_array_equal(
        loaded.generate(PROMPTS[family], MAX_NEW_TOKENS),
        greedy_full_pass(model, family, PROMPTS[family]),
    )
