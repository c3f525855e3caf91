"""`keras-attn-convert` (`keras_attn.convert.main`): checkpoints in, this
library's files out, reloaded with the public API and compared with the
model built directly from the source."""

import json
import os
import pathlib
import shutil
import subprocess
import sys

import keras
import numpy as np
import pytest

import keras_attn
import keras_attn_cli
from keras_attn.convert import main
from tests.checkpoint_files import perturb

INPUTS = {
    "token_ids": np.array([[2, 17, 40, 98, 5, 3], [2, 61, 7, 3, 0, 0]], "int32"),
    "segment_ids": np.array([[0, 0, 0, 1, 1, 1], [0, 0, 0, 0, 0, 0]], "int32"),
}


def outputs(model):
    return keras.ops.convert_to_numpy(model(INPUTS))


def reload_snippet(printed):
    """The indented Python lines the converter printed after "Reload it"."""
    lines = printed.split("Reload it", 1)[1].splitlines()[1:]
    return "\n".join(line[4:] for line in lines if line.startswith("    "))


def test_hugging_face_directory_to_weights_and_config(hf_bert_dir, tmp_path, capsys):
    output = str(tmp_path / "converted")
    assert main([hf_bert_dir, output, "--application", "encoder"]) == 0
    captured = capsys.readouterr()
    assert "transformers.AutoModel" in captured.out  # the reference comparison ran
    assert "[1/" in captured.err and "encoder.layer.1." in captured.err  # progress
    # Every step says it is starting, in order, before the silent stretches.
    steps = ["Building the model", "[1/", "Writing", "Verifying: reloading", "Comparing with transformers.AutoModel"]
    positions = [captured.err.index(step) for step in steps]
    assert positions == sorted(positions), captured.err
    # The printed reload lines load the files with the application asked for.
    namespace = {}
    exec(reload_snippet(captured.out), namespace)
    assert namespace["model"].application == "encoder"
    np.testing.assert_array_equal(
        outputs(namespace["model"]), outputs(keras_attn.build_transformer_model(hf_bert_dir))
    )

    reloaded = keras_attn.build_transformer_model(
        os.path.join(output, "config.json"), os.path.join(output, "model.weights.h5")
    )
    direct = keras_attn.build_transformer_model(hf_bert_dir)
    np.testing.assert_array_equal(outputs(reloaded), outputs(direct))


def test_google_checkpoint_to_keras_file(tf_bert_checkpoint, tmp_path, capsys):
    config, prefix, _ = tf_bert_checkpoint
    output = str(tmp_path / "converted.keras")
    # The configuration is found beside the checkpoint (bert_config.json).
    assert main([prefix, output, "--format", "keras", "--quiet"]) == 0
    captured = capsys.readouterr()
    assert "reproduce the model built from the checkpoint" in captured.out
    assert "transformers" not in captured.out  # no reference framework for TF checkpoints
    assert captured.err == ""  # --quiet

    reloaded = keras.saving.load_model(output)
    direct = keras_attn.build_transformer_model(config, prefix)
    np.testing.assert_array_equal(outputs(reloaded), outputs(direct))
    # Keras resolves only registered classes: the printed reload lines
    # import keras_attn before loading, and load the file.
    snippet = reload_snippet(captured.out)
    assert snippet.splitlines() == [
        "import keras", "import keras_attn", f"model = keras.saving.load_model({output!r})"
    ]
    namespace = {}
    exec(snippet, namespace)
    np.testing.assert_array_equal(outputs(namespace["model"]), outputs(direct))


def test_a_failed_verification_exits_3_and_says_what_differs(
    hf_bert_dir, tmp_path, monkeypatch, capsys
):
    import torch
    import transformers

    real = transformers.AutoModel.from_pretrained

    def drifted(*args, **kwargs):
        model = real(*args, **kwargs)
        with torch.no_grad():
            # One entry: a shift of all features LayerNorm would cancel.
            model.encoder.layer[1].output.dense.bias[0] += 1e-2
        return model

    monkeypatch.setattr(transformers.AutoModel, "from_pretrained", drifted)
    assert main([hf_bert_dir, str(tmp_path / "converted"), "--quiet"]) == 3
    message = capsys.readouterr().err.strip()
    assert message.startswith("keras-attn-convert: verification failed:")
    assert "transformers.AutoModel" in message and len(message.splitlines()) == 1


def test_errors_name_the_file_and_the_variable(hf_bert_dir, tmp_path, capsys):
    missing = str(tmp_path / "nowhere" / "bert_model.ckpt")
    assert main([missing, str(tmp_path / "out")]) == 1
    assert missing in capsys.readouterr().err

    # A configuration with one layer more than the checkpoint has.
    with open(os.path.join(hf_bert_dir, "config.json")) as file:
        config = json.load(file)
    config["num_hidden_layers"] += 1
    config_path = tmp_path / "three_layers.json"
    config_path.write_text(json.dumps(config))
    assert main([hf_bert_dir, str(tmp_path / "out"), "--config", str(config_path), "--quiet"]) == 1
    message = capsys.readouterr().err.strip()
    assert len(message.splitlines()) == 1
    assert "model.safetensors" in message
    assert "Transformer-2-" in message and "encoder.layer.2." in message
    assert not os.path.exists(tmp_path / "out")  # nothing written


def test_an_output_that_would_overwrite_the_source_is_refused(hf_bert_dir, tmp_path, capsys):
    transformers = pytest.importorskip("transformers")
    source = tmp_path / "hf"
    shutil.copytree(hf_bert_dir, source)
    before = {path.name: path.read_bytes() for path in source.iterdir()}
    config = str(source / "config.json")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    refused = [
        [str(source), str(source)],  # OUTPUT is SOURCE
        [str(source / "model.safetensors"), str(source)],  # ... given as its file
        [str(source), str(tmp_path)],  # OUTPUT contains SOURCE
        [str(source), str(elsewhere), "--config", str(elsewhere / "config.json")],
        [str(source), str(source / "config.keras"), "--format", "keras",
         "--config", str(source / "config.keras")],
    ]
    (elsewhere / "config.json").write_bytes(before["config.json"])
    (source / "config.keras").write_bytes(before["config.json"])
    for arguments in refused:
        assert main(arguments + ["--quiet"]) == 1, arguments
        message = capsys.readouterr().err
        assert message.startswith("keras-attn-convert: error: OUTPUT"), message
        assert repr(arguments[1]) in message
    os.remove(source / "config.keras")
    assert {path.name: path.read_bytes() for path in source.iterdir()} == before
    assert sorted(os.listdir(elsewhere)) == ["config.json"]
    assert sorted(os.listdir(tmp_path)) == ["elsewhere", "hf"]
    transformers.AutoModel.from_pretrained(str(source))  # still a transformers directory

    # A new directory inside SOURCE overwrites nothing the run reads.
    inside = str(source / "converted")
    assert main([str(source), inside, "--quiet"]) == 0
    assert "transformers.AutoModel" in capsys.readouterr().out
    assert sorted(os.listdir(inside)) == ["config.json", "model.weights.h5"]
    assert (source / "config.json").read_bytes() == before["config.json"]


def test_help_lists_the_options(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["--help"])
    assert exit_info.value.code == 0
    usage = capsys.readouterr().out
    for option in ("--config", "--variant", "--application", "--format", "--overwrite", "--no-verify"):
        assert option in usage


def test_help_lists_every_family_variant_and_application_the_library_has(capsys):
    """The help said "BERT-family, GPT-2 or T5" while LLaMA and others
    converted. Its lists are written where `--help` needs no Keras
    (`keras_attn_cli`), and must equal the registries."""
    from keras_attn.checkpoints import families
    from keras_attn.models.registry import VARIANTS
    from keras_attn.models.transformer import APPLICATIONS

    assert keras_attn_cli.CHECKPOINT_FAMILIES == tuple(
        family.title for family in families.FAMILIES.values()
    )
    assert keras_attn_cli.VARIANTS == tuple(
        name for name, variant in VARIANTS.items() if variant.__module__.startswith("keras_attn.")
    )
    assert keras_attn_cli.APPLICATIONS == tuple(APPLICATIONS)
    with pytest.raises(SystemExit):
        main(["--help"])
    usage = " ".join(capsys.readouterr().out.split())
    for name in keras_attn_cli.CHECKPOINT_FAMILIES + keras_attn_cli.VARIANTS:
        assert name in usage, name


REPO_ROOT = pathlib.Path(__file__).resolve().parents[2]

# The console script of setup.cfg, run where Keras' default backend
# (TensorFlow, no KERAS_BACKEND) cannot be imported, as in a JAX-only install.
CONSOLE_SCRIPT_WITHOUT_TENSORFLOW = """
import configparser, importlib, importlib.abc, sys

class Missing(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name.split(".")[0] == "tensorflow":
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)

sys.meta_path.insert(0, Missing())
setup = configparser.ConfigParser()
setup.read("setup.cfg")
scripts = setup["options.entry_points"]["console_scripts"].strip().splitlines()
(script,) = [line for line in scripts if line.split("=")[0].strip() == "keras-attn-convert"]
name, target = (part.strip() for part in script.split("="))
assert name == "keras-attn-convert", name
module, function = target.split(":")
sys.argv[0] = name
sys.exit(getattr(importlib.import_module(module), function)())
"""


def test_the_console_script_needs_no_backend_for_help_and_says_which_is_missing(tmp_path):
    """`keras-attn-convert --help` in a JAX-only install without
    `KERAS_BACKEND` printed a traceback from `import keras_attn`."""
    if keras.config.backend() != "jax":
        pytest.skip("a subprocess independent of the backend: checked in the JAX run")
    environment = {key: value for key, value in os.environ.items()
                   if key not in ("KERAS_BACKEND", "PYTHONPATH")}
    environment["KERAS_HOME"] = str(tmp_path)  # no keras.json choosing a backend

    def console_script(*arguments):
        return subprocess.run(
            [sys.executable, "-c", CONSOLE_SCRIPT_WITHOUT_TENSORFLOW, *arguments],
            env=environment, cwd=REPO_ROOT, capture_output=True, text=True,
        )

    result = console_script("--help")
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.startswith("usage: keras-attn-convert")
    assert "LLaMA" in result.stdout and result.stderr == ""

    result = console_script("source", str(tmp_path / "output"))
    assert result.returncode == 1
    assert result.stdout == ""
    assert result.stderr.startswith(
        "keras-attn-convert: error: keras_attn needs Keras' backend 'tensorflow' (Keras' "
        "default when KERAS_BACKEND is not set), but its package 'tensorflow' is not installed"
    ), result.stderr[-3000:]
    assert len(result.stderr.splitlines()) == 1  # no traceback
    assert not os.path.exists(tmp_path / "output")


# GPT-2 and T5 ------------------------------------------------------------

GPT2_INPUTS = {"token_ids": np.array([[5, 17, 3, 44, 9, 28], [7, 12, 50, 0, 1, 2]], "int32")}
# A source and a target of different lengths; the source's second row padded.
T5_INPUTS = {
    "encoder_token_ids": np.array([[3, 4, 5, 9, 1], [7, 8, 1, 0, 0]], "int32"),
    "decoder_token_ids": np.array([[0, 6, 2], [0, 11, 40]], "int32"),
}


@pytest.fixture(scope="module")
def hf_gpt2_dir(tmp_path_factory):
    """A random `GPT2LMHeadModel` (no pad id) as a Hugging Face directory."""
    transformers = pytest.importorskip("transformers")
    pytest.importorskip("torch")
    config = transformers.GPT2Config(
        vocab_size=61, n_positions=40, n_embd=24, n_layer=2, n_head=3,
        bos_token_id=1, eos_token_id=1,
    )
    model = perturb(transformers.GPT2LMHeadModel(config), seed=2).eval()
    directory = tmp_path_factory.mktemp("hf_gpt2")
    model.save_pretrained(directory)
    return str(directory)


@pytest.fixture(scope="module")
def hf_t5_dir(tmp_path_factory):
    """A random T5 v1.0 `T5ForConditionalGeneration` (tied, rescaled head)."""
    transformers = pytest.importorskip("transformers")
    pytest.importorskip("torch")
    config = transformers.T5Config(
        vocab_size=64, d_model=16, d_kv=8, d_ff=32, num_layers=2, num_heads=2
    )
    model = perturb(transformers.T5ForConditionalGeneration(config), seed=3).eval()
    directory = tmp_path_factory.mktemp("hf_t5")
    model.save_pretrained(directory)
    return str(directory)


@pytest.fixture(scope="module")
def hf_t5_v1_1_dir(tmp_path_factory):
    """A random T5 v1.1 (gated GELU, untied head; transformers 5 writes
    `scale_decoder_outputs: false` for it)."""
    transformers = pytest.importorskip("transformers")
    pytest.importorskip("torch")
    config = transformers.T5Config(
        vocab_size=64, d_model=16, d_kv=8, d_ff=32, num_layers=2, num_heads=2,
        feed_forward_proj="gated-gelu", tie_word_embeddings=False,
    )
    model = perturb(transformers.T5ForConditionalGeneration(config), seed=4).eval()
    directory = tmp_path_factory.mktemp("hf_t5_v1_1")
    model.save_pretrained(directory)
    return str(directory)


def reload(output, format):
    if format == "keras":
        return keras.saving.load_model(output)
    return keras_attn.build_transformer_model(
        os.path.join(output, "config.json"), os.path.join(output, "model.weights.h5")
    )


@pytest.mark.parametrize("format", ["weights", "keras"])
def test_gpt2_directory(hf_gpt2_dir, tmp_path, capsys, format):
    output = str(tmp_path / ("converted.keras" if format == "keras" else "converted"))
    assert main([hf_gpt2_dir, output, "--format", format, "--quiet"]) == 0
    summary = capsys.readouterr().out
    assert "transformers.AutoModelForCausalLM's logits" in summary

    reloaded = reload(output, format)
    direct = keras_attn.build_transformer_model(hf_gpt2_dir)
    assert reloaded.application == "lm"  # GPT-2's own application by default
    np.testing.assert_array_equal(
        keras.ops.convert_to_numpy(reloaded(GPT2_INPUTS)),
        keras.ops.convert_to_numpy(direct(GPT2_INPUTS)),
    )


def test_gpt2_encoder_application(hf_gpt2_dir, tmp_path, capsys):
    # GPT-2's encoder is causal, as transformers' GPT2Model.
    output = str(tmp_path / "encoder")
    assert main([hf_gpt2_dir, output, "--application", "encoder", "--quiet"]) == 0
    assert "transformers.AutoModel's last_hidden_state" in capsys.readouterr().out


@pytest.mark.parametrize("format", ["weights", "keras"])
def test_t5_directory(hf_t5_dir, tmp_path, capsys, format, monkeypatch):
    # The two models' decoding is compared eagerly on torch: what this
    # checks is the converted files (the compiled step has its own tests).
    monkeypatch.setenv("KERAS_ATTN_TORCH_COMPILE", "0")
    output = str(tmp_path / ("converted.keras" if format == "keras" else "converted"))
    assert main([hf_t5_dir, output, "--format", format, "--quiet"]) == 0
    summary = capsys.readouterr().out
    assert "transformers.AutoModelForSeq2SeqLM's logits" in summary

    reloaded = reload(output, format)
    direct = keras_attn.build_transformer_model(hf_t5_dir)
    assert reloaded.application == "seq2seq"
    np.testing.assert_array_equal(
        keras.ops.convert_to_numpy(reloaded(T5_INPUTS)),
        keras.ops.convert_to_numpy(direct(T5_INPUTS)),
    )
    np.testing.assert_array_equal(
        reloaded.generate([[3, 4, 5, 1]], 4), direct.generate([[3, 4, 5, 1]], 4)
    )


def test_t5_v1_1_keeps_its_untied_head(hf_t5_v1_1_dir, tmp_path, capsys):
    # The written config.json says which T5 it is: the reload picks "t5.1.1".
    output = str(tmp_path / "converted")
    assert main([hf_t5_v1_1_dir, output, "--quiet"]) == 0
    assert "transformers.AutoModelForSeq2SeqLM's logits" in capsys.readouterr().out
    assert type(reload(output, "weights").template).__name__ == "T5V11"


def test_t5_encoder_variant(hf_t5_dir, tmp_path, capsys):
    output = str(tmp_path / "encoder")
    assert main([hf_t5_dir, output, "--variant", "t5_encoder", "--quiet"]) == 0
    assert "transformers.T5EncoderModel's last_hidden_state" in capsys.readouterr().out


def test_a_t5_that_drifted_fails_on_the_decoder_logits(hf_t5_dir, tmp_path, monkeypatch, capsys):
    """The seq2seq reference comparison is live: one decoder weight changed
    in transformers' model fails the verification."""
    import torch
    import transformers

    real = transformers.AutoModelForSeq2SeqLM.from_pretrained

    def drifted(*args, **kwargs):
        model = real(*args, **kwargs)
        with torch.no_grad():
            model.decoder.block[1].layer[1].EncDecAttention.o.weight[0, 0] += 1e-2
        return model

    monkeypatch.setattr(transformers.AutoModelForSeq2SeqLM, "from_pretrained", drifted)
    assert main([hf_t5_dir, str(tmp_path / "converted"), "--quiet"]) == 3
    message = capsys.readouterr().err
    assert "transformers.AutoModelForSeq2SeqLM" in message
