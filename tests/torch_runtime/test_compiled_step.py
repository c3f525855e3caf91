"""torch: the decoding step compiled by `torch.compile` (`CompiledStep`),
from its Python or from its recorded operations: one graph per shape, none
per step, no graph breaks, the eager step's tokens, and an eager fallback
that says why."""

import concurrent.futures
import logging

import keras
import numpy as np
import pytest

import keras_attn
from keras_attn.generation import generator as generator_module
from keras_attn.torch_runtime import compiled_step
from keras_attn.torch_runtime import step_graph
from tests.generation.test_generate import uncached_greedy

pytestmark = pytest.mark.skipif(
    keras.config.backend() != "torch", reason="torch.compile is torch's"
)

CONFIG = dict(
    vocab_size=40, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
    intermediate_size=24, max_position_embeddings=32, hidden_dropout_prob=0.0,
    attention_probs_dropout_prob=0.0, initializer_range=0.2, type_vocab_size=2,
)
STEPS = 6


@pytest.fixture(scope="module")
def model():
    return keras_attn.build_transformer_model(CONFIG, application="lm")


def dynamo_counts():
    """Graphs dynamo has compiled, graph breaks and recompilations so far in
    this process (its counters are global, so tests take differences)."""
    from torch._dynamo.utils import counters

    return (
        counters["stats"]["unique_graphs"],
        sum(counters["graph_break"].values()),
        sum(counters["recompiles"].values()),
    )


# How the step reaches torch.compile: its Python traced by dynamo, or its
# recorded operations (`KERAS_ATTN_RECORDED_STEPS`, `RecordedStep`).
KINDS = {"python": "0", "recorded": "1"}


@pytest.fixture(params=sorted(KINDS))
def compile_kind(request, monkeypatch):
    monkeypatch.setenv("KERAS_ATTN_RECORDED_STEPS", KINDS[request.param])
    return request.param


def test_one_graph_per_shape_and_none_per_step(model, compile_kind):
    """The first call compiles the step once (one graph, no break) and runs
    it for every step; a second call of the same shapes compiles nothing; a
    new batch size compiles one graph more. The tokens are greedy decoding
    by the full pass."""
    generator = generator_module.Generator(model)
    before = dynamo_counts()
    prompts = [[2, 7, 9, 11], [3, 5, 8, 4]]
    tokens = generator.generate(prompts, STEPS)
    graphs, breaks, _ = np.subtract(dynamo_counts(), before)
    assert (graphs, breaks) == (1, 0)
    np.testing.assert_array_equal(tokens, uncached_greedy(model, prompts, STEPS))

    before = dynamo_counts()
    generator.generate([[6, 1, 17, 30], [12, 13, 14, 15]], STEPS)
    assert tuple(np.subtract(dynamo_counts(), before)) == (0, 0, 0)

    # From a thread where Keras never set its per-thread state (a server's
    # worker): the same graph, not a second compile.
    before = dynamo_counts()
    with concurrent.futures.ThreadPoolExecutor(1) as worker:
        tokens = worker.submit(generator.generate, prompts, STEPS).result()
    assert tuple(np.subtract(dynamo_counts(), before)) == (0, 0, 0)
    np.testing.assert_array_equal(tokens, uncached_greedy(model, prompts, STEPS))

    before = dynamo_counts()
    prompts = [[2, 7, 9, 11], [3, 5, 8, 4], [20, 21, 22, 23]]
    tokens = generator.generate(prompts, STEPS)
    graphs, breaks, _ = np.subtract(dynamo_counts(), before)
    assert (graphs, breaks) == (1, 0)
    np.testing.assert_array_equal(tokens, uncached_greedy(model, prompts, STEPS))


@pytest.mark.parametrize("sampler", ["top_k", "top_p"])
def test_a_random_sampler_picks_inside_the_one_compiled_graph(
    model, sampler, compile_kind, monkeypatch
):
    """The sampler's choice of the token (its filter, the seeded Gumbel
    noise, the bookkeeping of forced and finished rows) compiles into the
    step's one graph, without a break; another seed and sampler object
    compile nothing more; the tokens are those of the eager step with the
    same seeds."""
    prompts = [[2, 7, 9, 11], [3, 5, 8]]
    monkeypatch.setenv("KERAS_ATTN_TORCH_COMPILE", "0")
    eager = generator_module.Generator(model)
    expected = [eager.generate(prompts, STEPS, sampler=sampler, seed=seed) for seed in (3, 4)]
    monkeypatch.setenv("KERAS_ATTN_TORCH_COMPILE", "1")
    generator = generator_module.Generator(model)
    before = dynamo_counts()
    tokens = generator.generate(prompts, STEPS, sampler=sampler, seed=3)
    graphs, breaks, _ = np.subtract(dynamo_counts(), before)
    assert (graphs, breaks) == (1, 0)
    before = dynamo_counts()
    again = generator.generate(prompts, STEPS, sampler=sampler, seed=4)
    assert tuple(np.subtract(dynamo_counts(), before)) == (0, 0, 0)
    np.testing.assert_array_equal(tokens, expected[0])
    np.testing.assert_array_equal(again, expected[1])
    assert not np.array_equal(expected[0], expected[1])  # the seeds matter


def test_two_models_keep_their_own_graphs(model):
    """Each generator compiles its own copy of the step, so another model's
    graphs are not recompilations of this one's (dynamo's recompile limit
    counts per code object)."""
    other = keras_attn.build_transformer_model(CONFIG, application="lm")
    prompts = [[2, 7, 9, 11], [3, 5, 8, 4]]
    first, second = generator_module.Generator(model), generator_module.Generator(other)
    first.generate(prompts, STEPS)
    before = dynamo_counts()
    second.generate(prompts, STEPS)
    assert tuple(np.subtract(dynamo_counts(), before))[1:] == (0, 0)
    assert first._step.compiled is not second._step.compiled


@pytest.mark.parametrize("message", ["no C++ compiler found", ""], ids=["message", "empty"])
def test_a_compiler_failure_falls_back_to_eager_and_says_why(model, monkeypatch, caplog, message):
    import torch

    def failing_compile(function, **kwargs):
        def compiled(*args):
            raise torch._dynamo.exc.InternalTorchDynamoError(message)

        return compiled

    monkeypatch.setattr(torch, "compile", failing_compile)
    generator = generator_module.Generator(model)
    prompts = [[2, 7, 9], [3, 5, 8]]
    with caplog.at_level(logging.WARNING, logger="keras_attn"):
        tokens = generator.generate(prompts, STEPS)
        generator.generate(prompts, STEPS)
    np.testing.assert_array_equal(tokens, uncached_greedy(model, prompts, STEPS))
    messages = [r.getMessage() for r in caplog.records if "torch.compile failed" in r.getMessage()]
    assert len(messages) == 1, messages  # said once, not per step or call
    assert f"InternalTorchDynamoError: {message or '(no message)'}" in messages[0]


def test_an_error_of_the_step_itself_is_not_swallowed(model, monkeypatch):
    import torch

    def compile_that_breaks_the_step(function, **kwargs):
        def compiled(*args):
            raise ValueError("the step's own error")

        return compiled

    monkeypatch.setattr(torch, "compile", compile_that_breaks_the_step)
    with pytest.raises(ValueError, match="the step's own error"):
        generator_module.Generator(model).generate([[2, 7, 9]], STEPS)


def test_the_environment_turns_compilation_off(model, monkeypatch):
    monkeypatch.setenv("KERAS_ATTN_TORCH_COMPILE", "0")
    generator = generator_module.Generator(model)
    before = dynamo_counts()
    generator.generate([[2, 7, 9]], STEPS)
    assert generator._step is None
    assert tuple(np.subtract(dynamo_counts(), before)) == (0, 0, 0)


def test_the_compile_mode_is_read_from_the_environment(monkeypatch):
    read = compiled_step.torch_compile_mode
    for value, mode in (("1", "always"), ("0", "never"), ("auto", "auto")):
        monkeypatch.setenv("KERAS_ATTN_TORCH_COMPILE", value)
        assert read() == mode
    monkeypatch.delenv("KERAS_ATTN_TORCH_COMPILE")
    assert read() == "auto"
    monkeypatch.setenv("KERAS_ATTN_TORCH_COMPILE", "sometimes")
    with pytest.raises(ValueError, match="KERAS_ATTN_TORCH_COMPILE='sometimes'"):
        read()


def test_a_step_on_a_gpu_compiles_after_the_longer_gpu_compile_time(monkeypatch):
    """Compiling costs more on a GPU (inductor builds CUDA kernels: 27 s
    for GPT-2 small on an H200, 10 to 15 s on the 2-core CPU), so under
    `"auto"` eager steps that took 15 s compile a CPU step's shape but not a
    GPU step's, which compiles after 25 s; the step's tokens decide."""
    step = compiled_step.CompiledStep(generator_module.decoding_step, "auto")
    monkeypatch.setattr(step_graph, "on_gpu", lambda tokens: tokens == "on a GPU")
    step.step = lambda *args: "eager"
    monkeypatch.setattr(compiled_step, "_step_shape", lambda args: "shape")
    monkeypatch.setenv("KERAS_ATTN_TORCH_CUDA_GRAPHS", "0")  # graphs apart
    step.compiled = lambda *args: "compiled"
    for tokens, spent, expected in [
        ("on a GPU", 15.0, "eager"), ("on the CPU", 15.0, "compiled"),
        ("on a GPU", 26.0, "compiled"),
    ]:
        step.compiled_shapes, step.eager_seconds = set(), {"shape": spent}
        assert step("forward", tokens) == expected, (tokens, spent)


def test_by_default_a_shape_compiles_once_its_eager_steps_took_what_compiling_costs(
    model, monkeypatch, capsys
):
    """Unset, a short generation runs eagerly (nothing compiled, nothing
    said); once a shape's eager steps have taken
    `COMPILE_AFTER_EAGER_SECONDS`, it compiles, says so once, and later
    steps of that shape run the compiled graph. Tokens are greedy decoding
    by the full pass throughout."""
    monkeypatch.delenv("KERAS_ATTN_TORCH_COMPILE")
    monkeypatch.setattr(keras.config, "is_interactive_logging_enabled", lambda: True)
    generator = generator_module.Generator(model)
    prompts = [[2, 7, 9, 11], [3, 5, 8, 4]]
    expected = uncached_greedy(model, prompts, STEPS)
    before = dynamo_counts()
    np.testing.assert_array_equal(generator.generate(prompts, STEPS), expected)
    assert tuple(np.subtract(dynamo_counts(), before)) == (0, 0, 0)
    assert generator._step.mode == "auto" and not generator._step.compiled_shapes
    (spent,) = generator._step.eager_seconds.values()  # one shape, timed
    assert spent > 0
    assert "compiling" not in capsys.readouterr().err

    # As if compiling cost less than the steps so far on this device (but
    # not on a GPU: a step there would still run eagerly, tested below):
    # the next call's first step compiles, and the rest reuse the graph.
    monkeypatch.setattr(
        compiled_step, "COMPILE_AFTER_EAGER_SECONDS", {"cpu": spent / 2, "gpu": spent * 2}
    )
    before = dynamo_counts()
    np.testing.assert_array_equal(generator.generate(prompts, STEPS), expected)
    graphs, breaks, _ = np.subtract(dynamo_counts(), before)
    assert (graphs, breaks) == (1, 0)
    assert len(generator._step.compiled_shapes) == 1
    assert generator._step.eager_seconds[next(iter(generator._step.compiled_shapes))] == spent
    err = capsys.readouterr().err
    assert err.count("compiling the decoding step for this shape") == 1, err
