"""GPT-2 against transformers' GPT2LMHeadModel: logits, greedy and beam
generation, and the same weights under bert4keras's TensorFlow names."""

import json
import re

import numpy as np
import pytest

import keras_attn
from keras_attn.checkpoints.readers import CheckpointError
from tests.checkpoint_files import perturb
from tests.checkpoint_files import write_tf_checkpoint
from tests.harness import to_numpy

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

SMALL = dict(
    vocab_size=61, n_positions=40, n_embd=24, n_layer=2, n_head=3,
    resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, bos_token_id=1, eos_token_id=1,
)
# Right-padded prompts of several lengths (GPT-2 has no pad id: the mask says).
IDS = np.array([[5, 17, 3, 44, 9, 28, 2], [7, 12, 50, 0, 0, 0, 0]])
MASK = np.array([[1] * 7, [1, 1, 1, 0, 0, 0, 0]])


@pytest.fixture(scope="module")
def hf_gpt2(tmp_path_factory):
    torch.manual_seed(0)
    model = perturb(transformers.GPT2LMHeadModel(transformers.GPT2Config(**SMALL)), seed=1)
    model.eval()
    directory = tmp_path_factory.mktemp("gpt2")
    model.save_pretrained(directory)
    return model, directory


@pytest.fixture(scope="module")
def ours(hf_gpt2):
    return keras_attn.build_transformer_model(hf_gpt2[1], padding_mask_input=True)


def hf_logits(model, ids, mask):
    with torch.no_grad():
        return model(torch.tensor(ids), attention_mask=torch.tensor(mask)).logits.numpy()


def test_logits_equal_transformers_with_padding(hf_gpt2, ours):
    assert type(ours.template).__name__ == "Gpt2" and ours.application == "lm"
    logits = to_numpy(ours({"token_ids": IDS, "padding_mask": MASK}))
    expected = hf_logits(hf_gpt2[0], IDS, MASK)
    real = MASK.astype(bool)
    np.testing.assert_allclose(logits[real], expected[real], atol=1e-4)


def test_encoder_equals_transformers_gpt2_model(hf_gpt2):
    """`application="encoder"` is GPT2Model's causal last hidden state."""
    encoder = keras_attn.build_transformer_model(
        hf_gpt2[1], application="encoder", padding_mask_input=True
    )
    hidden = to_numpy(encoder({"token_ids": IDS, "padding_mask": MASK}))
    with torch.no_grad():
        expected = hf_gpt2[0].transformer(
            torch.tensor(IDS), attention_mask=torch.tensor(MASK)
        ).last_hidden_state.numpy()
    real = MASK.astype(bool)
    np.testing.assert_allclose(hidden[real], expected[real], atol=1e-5)


def test_pytorch_bin_loads_the_same(hf_gpt2, ours, tmp_path):
    # An older save: `pytorch_model.bin` of the full state dict (tied head
    # included), beside the config.
    torch.save(hf_gpt2[0].state_dict(), tmp_path / "pytorch_model.bin")
    (tmp_path / "config.json").write_text((hf_gpt2[1] / "config.json").read_text())
    model = keras_attn.build_transformer_model(tmp_path, padding_mask_input=True)
    inputs = {"token_ids": IDS, "padding_mask": MASK}
    np.testing.assert_array_equal(to_numpy(model(inputs)), to_numpy(ours(inputs)))


@pytest.fixture(scope="module")
def generating(hf_gpt2):
    return keras_attn.build_transformer_model(hf_gpt2[1])


PROMPTS = [[5, 17, 3, 44], [7, 12], [30, 2, 8, 19, 21, 6]]


def test_greedy_generation_equals_transformers_generate(hf_gpt2, generating):
    tokens = generating.generate(PROMPTS, 8)
    for prompt, row in zip(PROMPTS, tokens):
        with torch.no_grad():
            expected = hf_gpt2[0].generate(
                torch.tensor([prompt]), max_new_tokens=8, do_sample=False, use_cache=True,
                pad_token_id=0, eos_token_id=None,
            )[0, len(prompt):]
        assert row.tolist() == expected.tolist()


def test_beam_search_equals_transformers_best_beam(hf_gpt2, generating):
    """No end token: both searches keep 4 beams to the last step and return
    the highest-scoring one (length_penalty 0 here, 1 there: every beam has
    the same length, so the order is the same)."""
    tokens = generating.generate(PROMPTS, 5, sampler=keras_attn.samplers.BeamSearch(4))
    for prompt, row in zip(PROMPTS, tokens):
        with torch.no_grad():
            expected = hf_gpt2[0].generate(
                torch.tensor([prompt]), max_new_tokens=5, num_beams=4, do_sample=False,
                early_stopping=False, pad_token_id=0, eos_token_id=None,
            )[0, len(prompt):]
        assert row.tolist() == expected.tolist()


def bert4keras_names(hf_name):
    """Hugging Face GPT-2 name -> the TF names bert4keras's GPT2 reads
    (written here from its `variable_mapping`, independently of the table);
    `c_attn` splits into three."""
    name = hf_name.removeprefix("transformer.")
    block = re.match(r"h\.(\d+)\.(.*)", name)
    if block is None:
        return {
            "wte.weight": "gpt/embeddings/word_embeddings",
            "wpe.weight": "gpt/embeddings/position_embeddings",
            "ln_f.weight": "gpt/output/LayerNorm/gamma",
            "ln_f.bias": "gpt/output/LayerNorm/beta",
        }.get(name)
    prefix, rest = f"gpt/transformer/layer_{block.group(1)}/", block.group(2)
    suffix = {"weight": "kernel", "bias": "bias"}
    module, kind = rest.rsplit(".", 1)
    if module == "attn.c_attn":
        return [prefix + f"attention/self/{p}/{suffix[kind]}" for p in ("query", "key", "value")]
    return prefix + {
        "ln_1": f"attention/input/LayerNorm/{'gamma' if kind == 'weight' else 'beta'}",
        "attn.c_proj": f"attention/output/dense/{suffix[kind]}",
        "ln_2": f"input/LayerNorm/{'gamma' if kind == 'weight' else 'beta'}",
        "mlp.c_fc": f"intermediate/dense/{suffix[kind]}",
        "mlp.c_proj": f"output/dense/{suffix[kind]}",
    }[module]


def test_bert4keras_tensorflow_names_load_the_same_weights(hf_gpt2, ours, tmp_path):
    arrays = {}
    for name, tensor in hf_gpt2[0].state_dict().items():
        target = bert4keras_names(name)
        if target is None:
            continue
        value = tensor.numpy()
        if isinstance(target, list):
            for part, piece in zip(target, np.split(value, 3, axis=-1)):
                arrays[part] = piece
        else:
            arrays[target] = value
    prefix = write_tf_checkpoint(str(tmp_path / "model.ckpt"), arrays)
    config = {
        "vocab_size": SMALL["vocab_size"], "hidden_size": SMALL["n_embd"],
        "num_hidden_layers": SMALL["n_layer"], "num_attention_heads": SMALL["n_head"],
        "intermediate_size": 4 * SMALL["n_embd"], "hidden_act": "gelu_new",
        "max_position_embeddings": SMALL["n_positions"], "hidden_dropout_prob": 0.0,
        "attention_probs_dropout_prob": 0.0,
    }
    (tmp_path / "config.json").write_text(json.dumps(config))
    model = keras_attn.build_transformer_model(
        str(tmp_path / "config.json"), prefix, model="gpt2", padding_mask_input=True
    )
    inputs = {"token_ids": IDS, "padding_mask": MASK}
    np.testing.assert_allclose(to_numpy(model(inputs)), to_numpy(ours(inputs)), atol=1e-6)


def test_a_t5_checkpoint_is_refused_naming_the_variant(tmp_path):
    config = transformers.T5Config(vocab_size=32, d_model=8, d_kv=4, d_ff=16, num_layers=1, num_heads=2)
    transformers.T5ForConditionalGeneration(config).save_pretrained(tmp_path)
    with pytest.raises(ValueError, match="variant='t5'"):
        keras_attn.build_transformer_model(tmp_path, variant="gpt2")
    # The weights alone, with a GPT-2 config: the names say T5.
    gpt2 = keras_attn.build_transformer_model(
        dict(vocab_size=32, hidden_size=8, num_hidden_layers=1, num_attention_heads=2,
             intermediate_size=16), variant="gpt2",
    )
    with pytest.raises(CheckpointError, match=r"T5 weights.*variant='t5'"):
        keras_attn.load_checkpoint(gpt2, str(tmp_path / "model.safetensors"))
