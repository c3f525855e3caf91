"""`keras_attn.explain(model)` / `model.execution_plan()`: which path each
way of running a model takes, and why; on torch, the path the runner
actually took (`TorchRunner.last`) is the one the plan names."""

import keras
import numpy as np
import pytest

import keras_attn
from keras_attn.torch_runtime import plan as plan_module
from keras_attn.torch_runtime import settings

CONFIG = dict(vocab_size=50, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
              intermediate_size=32, max_position_embeddings=16, type_vocab_size=2)
INPUTS = {"token_ids": np.array([[5, 6, 7, 0]], "int32"),
          "segment_ids": np.zeros((1, 4), "int32")}
TORCH = keras.config.backend() == "torch"
torch_only = pytest.mark.skipif(not TORCH, reason="the torch runner's paths")


@pytest.fixture(autouse=True)
def default_switches(monkeypatch):
    for name in settings.SWITCHES:
        monkeypatch.delenv(name, raising=False)


@pytest.fixture(scope="module")
def encoder():
    return keras_attn.build_transformer_model(CONFIG)


@pytest.fixture(scope="module")
def lm():
    return keras_attn.build_transformer_model(CONFIG, variant="gpt2", application="lm")


def test_explain_prints_the_plan_and_returns_it(encoder, capsys):
    plan = keras_attn.explain(encoder)
    printed = capsys.readouterr().out
    assert printed.strip() == str(plan)
    assert set(plan.entries) == {"call", "predict", "fit", "generate"}
    assert f"backend {keras.config.backend()}" in printed
    assert plan.entries["generate"] == plan_module.Entry(
        "not available", "application 'encoder' does not generate"
    )


@pytest.mark.skipif(TORCH, reason="the XLA backends' plan")
def test_on_the_xla_backends_steps_and_generation_are_xla_programs(lm):
    lm.compile(optimizer="adam", loss="mse", jit_compile=True)
    plan = lm.execution_plan()
    assert plan.entries["fit"].path == plan.entries["predict"].path
    assert "XLA" in plan.entries["fit"].path or "jax.jit" in plan.entries["fit"].path
    assert "XLA program" in plan.entries["generate"].path
    assert plan.last == {}


@torch_only
def test_an_eager_model_runs_the_direct_pass_and_says_why_not_faster(encoder):
    expected = encoder.execution_plan().entries["call"]
    assert expected.path.startswith(plan_module.runner_module.PATHS["direct"])
    assert "autograd is on" in expected.why
    encoder(INPUTS)
    last = encoder.execution_plan().last["inference"]
    assert last.name == "direct"
    assert "jit_compile=True" in last.reason and "autograd is on" in last.reason


@torch_only
def test_on_the_cpu_inference_replays_recorded_passes_and_says_when_not(encoder, monkeypatch):
    import torch

    plan = encoder.execution_plan()
    assert plan.entries["predict"].path.startswith(
        plan_module.runner_module.PATHS["recorded pass"]
    )
    with torch.no_grad():
        for _ in range(3):
            encoder(INPUTS)
    plan = encoder.execution_plan()
    assert plan.last["inference"] == ("recorded pass", "")
    assert "(1 captures, 2 replays)" in plan.entries["predict"].why
    monkeypatch.setenv("KERAS_ATTN_RECORDED_PASSES", "off")
    plan = encoder.execution_plan()
    assert plan.entries["predict"].path == plan_module.runner_module.PATHS["direct"]
    assert "KERAS_ATTN_RECORDED_PASSES is off" in plan.entries["predict"].why
    with torch.no_grad():
        encoder(INPUTS)
    last = encoder.execution_plan().last["inference"]
    assert last.name == "direct" and "KERAS_ATTN_RECORDED_PASSES is off" in last.reason


@torch_only
@pytest.mark.parametrize("threads", [1, 2])
def test_recorded_paths_say_which_products_run_on_onednn(lm, threads):
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        plan = lm.execution_plan()
    finally:
        torch.set_num_threads(before)
    for name in ("predict", "generate"):
        why = plan.entries[name].why
        if threads == 1:
            assert "every matrix product by torch's mm (one torch thread)" in why, why
        else:
            assert "at most 16 rows by a matrix of at least 524,288 elements by oneDNN" in why


@torch_only
def test_with_the_direct_pass_off_keras_runs_the_pass(encoder, monkeypatch):
    from keras_attn.torch_runtime import direct_graph

    runs = []
    monkeypatch.setattr(direct_graph.DirectGraph, "__call__", lambda *a, **k: runs.append(1))
    monkeypatch.setenv("KERAS_ATTN_DIRECT_PASS", "0")
    plan = encoder.execution_plan()
    assert plan.entries["call"].why == "KERAS_ATTN_DIRECT_PASS is off"
    encoder(INPUTS)
    assert runs == []
    assert encoder.execution_plan().last["inference"] == (
        "keras", "KERAS_ATTN_DIRECT_PASS is off"
    )


@torch_only
def test_compiled_blocks_are_named_once_compiled_so(monkeypatch):
    model = keras_attn.build_transformer_model(CONFIG)
    model.compile(optimizer="adam", loss="mse", jit_compile=True)
    assert model.execution_plan().entries["call"].path == (
        plan_module.runner_module.PATHS["compiled blocks"]
    )
    monkeypatch.setenv("KERAS_ATTN_COMPILE_BLOCKS", "0")
    entry = model.execution_plan().entries["call"]
    assert entry.path.startswith("Keras' torch.compile of each whole step")
    assert entry.why == "KERAS_ATTN_COMPILE_BLOCKS is off"


@torch_only
def test_a_layer_with_a_mixed_policy_is_named_with_its_reason():
    model = keras_attn.build_transformer_model(CONFIG)
    layer = model.get_layer("Transformer-0-FeedForward")
    layer.dtype_policy = keras.DTypePolicy("mixed_bfloat16")
    plan = model.execution_plan()
    assert ("Transformer-0-FeedForward", "its dtype policy 'mixed_bfloat16' casts in "
            "`__call__`") in plan.keras_layers
    assert "run through Keras' __call__" in str(plan)


@torch_only
def test_on_a_gpu_inference_and_training_name_their_cuda_graphs(encoder, monkeypatch):
    monkeypatch.setattr(plan_module, "_device", lambda model, backend: "cuda:0")
    plan = encoder.execution_plan()
    assert "CUDA graph" in plan.entries["predict"].path
    assert "CUDA graph" in plan.entries["fit"].path
    assert "torch.no_grad()" in plan.entries["call"].path
    monkeypatch.setenv("KERAS_ATTN_TORCH_CUDA_GRAPHS", "0")
    plan = encoder.execution_plan()
    assert "CUDA graph" not in plan.entries["predict"].path
    assert "KERAS_ATTN_TORCH_CUDA_GRAPHS is off" in plan.entries["predict"].why


@torch_only
@pytest.mark.parametrize("value, words", [
    (None, "once a shape's eager steps have taken as long as compiling it"),
    ("1", "at each shape's first step"),
    ("0", "runs eagerly"),
])
def test_generation_names_the_compile_rule_of_its_decoding_step(lm, monkeypatch, value, words):
    if value is not None:
        monkeypatch.setenv("KERAS_ATTN_TORCH_COMPILE", value)
    entry = lm.execution_plan().entries["generate"]
    assert words in entry.path
    if value == "0":
        assert entry.why == "KERAS_ATTN_TORCH_COMPILE is off"
