"""`keras-attn-convert` (`keras_attn.convert.main`): checkpoints in, this
library's files out, reloaded with the public API and compared with the
model built directly from the source."""

import json
import os

import keras
import numpy as np
import pytest

import keras_attn
from keras_attn.convert import main

INPUTS = {
    "token_ids": np.array([[2, 17, 40, 98, 5, 3], [2, 61, 7, 3, 0, 0]], "int32"),
    "segment_ids": np.array([[0, 0, 0, 1, 1, 1], [0, 0, 0, 0, 0, 0]], "int32"),
}


def outputs(model):
    return keras.ops.convert_to_numpy(model(INPUTS))


def test_hugging_face_directory_to_weights_and_config(hf_bert_dir, tmp_path, capsys):
    output = str(tmp_path / "converted")
    assert main([hf_bert_dir, output]) == 0
    captured = capsys.readouterr()
    assert "transformers.AutoModel" in captured.out  # the reference comparison ran
    assert "[1/" in captured.err and "encoder.layer.1." in captured.err  # progress

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


def test_help_lists_the_options(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["--help"])
    assert exit_info.value.code == 0
    usage = capsys.readouterr().out
    for option in ("--config", "--variant", "--application", "--format", "--no-verify"):
        assert option in usage
