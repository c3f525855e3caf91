"""T5 configs and generation checked against what the model computes: a
`decoder_start_token_id` outside the vocabulary is refused (issue 34, item
2), and `generate` reads a source's pad ids as padding, as the full pass
does, a source of pad ids alone included (item 3)."""

import json

import keras
import numpy as np
import pytest

import keras_attn
from tests.harness import to_numpy

CONFIG = dict(
    model_type="t5", vocab_size=40, d_model=16, d_kv=8, d_ff=24, num_layers=1,
    num_heads=2, relative_attention_num_buckets=8, dropout_rate=0.0,
    decoder_start_token_id=0, pad_token_id=0, eos_token_id=1, feed_forward_proj="relu",
    initializer_range=0.5, is_encoder_decoder=True,
)


def test_a_decoder_start_token_outside_the_vocabulary_is_refused(tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(dict(CONFIG, decoder_start_token_id=40)))
    with pytest.raises(
        ValueError, match=r"config\.json.*`decoder_start_token_id=40` is not a token id .*vocab_size=40"
    ):
        keras_attn.build_transformer_model(str(path))
    with pytest.raises(ValueError, match="decoder_start_token_id=45"):
        keras_attn.build_transformer_model(CONFIG, decoder_start_token_id=45)
    # The last id is one.
    model = keras_attn.build_transformer_model(CONFIG, decoder_start_token_id=39)
    assert model.template.config.decoder_start_token_id == 39


@pytest.fixture(scope="module")
def t5():
    keras.utils.set_random_seed(1)
    return keras_attn.build_transformer_model(CONFIG)


def full_pass_greedy(model, sources, steps):
    """Greedy decoding by the model's own full pass: each source padded with
    the pad id (the full pass reads pad ids as padding), the decoder re-run
    on the start token and every token so far."""
    width = max(len(source) for source in sources)
    encoder_ids = np.zeros((len(sources), width), "int32")
    for row, source in enumerate(sources):
        encoder_ids[row, : len(source)] = source
    decoder_ids = np.zeros((len(sources), 1), "int32")
    for _ in range(steps):
        logits = to_numpy(model({"encoder_token_ids": encoder_ids, "decoder_token_ids": decoder_ids}))
        decoder_ids = np.concatenate([decoder_ids, logits[:, -1].argmax(-1)[:, None]], axis=1)
    return decoder_ids[:, 1:]


@pytest.mark.parametrize(
    "sources",
    [
        [[0, 0, 0], [5, 6, 7]],  # a source of pad ids alone
        [[5, 0, 7, 9], [0]],  # a pad id inside a source; a one-pad source
    ],
)
def test_generate_reads_pad_ids_as_the_full_pass_does(t5, sources):
    expected = full_pass_greedy(t5, sources, 5)
    # The check can fail: without its pad ids masked, the first source
    # decodes otherwise.
    assert t5.generate(sources, 5).tolist() == expected.tolist()
    for row, source in enumerate(sources):
        assert t5.generate([source], 5)[0].tolist() == expected[row].tolist()


@pytest.fixture(scope="module", params=["T5EncoderModel", "MT5EncoderModel"])
def hf_encoder_dir(request, tmp_path_factory):
    """A folder saved by transformers' T5EncoderModel / MT5EncoderModel
    (`is_encoder_decoder: false`, no decoder weights)."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    from tests.checkpoint_files import perturb

    config_class = transformers.MT5Config if request.param.startswith("MT5") else transformers.T5Config
    config = config_class(
        vocab_size=40, d_model=16, d_kv=8, d_ff=24, num_layers=2, num_heads=2,
        relative_attention_num_buckets=8, dropout_rate=0.0,
    )
    torch.manual_seed(0)
    model = perturb(getattr(transformers, request.param)(config), seed=7).eval()
    directory = tmp_path_factory.mktemp(request.param)
    model.save_pretrained(directory)
    assert json.loads((directory / "config.json").read_text())["is_encoder_decoder"] is False
    return model, str(directory)


def test_an_encoder_alone_loads_as_t5_encoder(hf_encoder_dir):
    import torch

    hf_model, directory = hf_encoder_dir
    ids = np.array([[5, 9, 13, 2, 1, 0, 0], [7, 3, 22, 31, 17, 8, 1]], "int32")
    with torch.no_grad():
        expected = hf_model(
            input_ids=torch.tensor(ids, dtype=torch.long),
            attention_mask=torch.tensor(ids != 0, dtype=torch.long),
        ).last_hidden_state.numpy()
    for variant in (None, "t5_encoder"):
        model = keras_attn.build_transformer_model(directory, variant=variant)
        assert type(model.template).__name__ == "T5Encoder"
        hidden = to_numpy(model({"token_ids": ids}))
        real = ids != 0
        np.testing.assert_allclose(hidden[real], expected[real], atol=1e-4, rtol=0)


def test_an_encoder_alone_is_refused_as_an_encoder_decoder(hf_encoder_dir):
    with pytest.raises(ValueError, match=r"variant='t5'.*T5EncoderModel.*use variant='t5_encoder'"):
        keras_attn.build_transformer_model(hf_encoder_dir[1], variant="t5")


@pytest.mark.parametrize("variant", ["t5", "t5.1.1", "mt5.1.1", "t5_encoder"])
def test_t5_runs_on_the_template_s_one_walk(variant):
    """T5 is built by the template's walk, as every variant is (issue 31,
    item 3): it overrides none of the hooks that only the full pass runs
    (`build_graph`, `get_inputs`, ...), so cached decoding follows what its
    full pass computes with no exemption, and only its hooks say how it
    differs (the encoder, the stacks' names, the mask of padding alone)."""
    from keras_attn.models.transformer import FULL_PASS_ONLY_HOOKS
    from keras_attn.models.transformer import Transformer

    untied = variant in ("t5.1.1", "mt5.1.1")
    model = keras_attn.build_transformer_model(
        dict(CONFIG, tie_word_embeddings=not untied), variant=variant
    )
    template = model.template
    assert template.full_pass_only_overrides() == []
    for name in FULL_PASS_ONLY_HOOKS + ("make_layers", "block_arguments", "finish_blocks"):
        assert getattr(type(template), name) is getattr(Transformer, name), name
    assert not hasattr(template, "decoding_follows")
    encoder_decoder = variant != "t5_encoder"
    assert (template.encoder_layers is not None) == encoder_decoder
    stack = "Decoder" if encoder_decoder else "Encoder"
    assert template.blocks[0].attention.name == f"{stack}-Transformer-0-MultiHeadSelfAttention"
    assert (template.blocks[0].cross_attention is not None) == encoder_decoder
