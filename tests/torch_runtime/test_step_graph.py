"""torch: compiled decoding steps replayed as CUDA graphs (`StepGraph`).

On the CPU: the setting; how `CompiledStep` uses graphs (with a stand-in
for the graph: a capture per shape per `generate` call, the first step of
a shape ungraphed, a failed capture falling back with a warning); and
`StepGraph`'s own buffers and copies over the compiled step, with CUDA's
capture and replay emulated.
On a GPU: for every registered generative variant, greedy decoding and beam
search with graphs give the tokens and scores of the compiled steps without
them, with one capture per shape."""

import logging

import keras
import numpy as np
import pytest

import keras_attn
from keras_attn.generation import generator as generator_module
from keras_attn.torch_runtime import compiled_step
from keras_attn.torch_runtime import step_graph
from tests.generation.conftest import registered_test_variants  # noqa: F401 - a fixture
from tests.generation.test_cached_forward import CASES
from tests.generation.test_cached_forward import CONFIG
from tests.torch_runtime.emulated_cuda import EmulatedCuda

pytestmark = pytest.mark.skipif(
    keras.config.backend() != "torch", reason="CUDA graphs of compiled steps are torch's"
)
PROMPTS = [[2, 7, 9, 11], [3, 5, 8]]
STEPS = 5


def cuda_available():
    import torch

    return torch.cuda.is_available()


class RecordedGraph:
    """A stand-in for `StepGraph` that records its captures and replays by
    calling the compiled step."""

    captures = []
    refuse = False

    def __init__(self, function, args):
        if RecordedGraph.refuse:
            raise step_graph.NotCapturable("refused by the test")
        RecordedGraph.captures.append(tuple(args[1].shape))
        self.function, self.replays = function, 0

    def __call__(self, *args):
        self.replays += 1
        return self.function(*args)


class CpuStepGraph(EmulatedCuda, step_graph.StepGraph):
    """`StepGraph` with CUDA emulated on the CPU (`EmulatedCuda`)."""

    made = []

    def __init__(self, function, args):
        super().__init__(function, args)
        CpuStepGraph.made.append(self)


@pytest.fixture
def graphs_on(monkeypatch):
    """Graphs on, for a step on any device, all compiled at once."""
    monkeypatch.setattr(step_graph, "on_gpu", lambda tokens: True)
    monkeypatch.setenv("KERAS_ATTN_TORCH_CUDA_GRAPHS", "1")
    monkeypatch.setenv("KERAS_ATTN_TORCH_COMPILE", "1")
    RecordedGraph.captures, RecordedGraph.refuse, CpuStepGraph.made = [], False, []
    yield monkeypatch
    RecordedGraph.captures, RecordedGraph.refuse, CpuStepGraph.made = [], False, []


@pytest.fixture(scope="module")
def generator():
    """One generator for the module, so that each step shape compiles once."""
    model = keras_attn.build_transformer_model(CONFIG, application="lm")
    return generator_module.Generator(model)


@pytest.fixture(scope="module")
def expected(generator):
    """Greedy tokens, and beam search's tokens and scores, of `PROMPTS`
    from the compiled steps without graphs."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("KERAS_ATTN_TORCH_COMPILE", "1")
        patch.setenv("KERAS_ATTN_TORCH_CUDA_GRAPHS", "0")
        return generator.generate(PROMPTS, STEPS), generator.beam_search(PROMPTS, STEPS, 3)


def test_each_call_captures_each_shape_once_after_its_first_step(generator, expected, graphs_on):
    """The first step of a shape runs compiled, the others replay its
    graph; the next `generate` call captures again (`new_run`)."""
    graphs_on.setattr(step_graph, "StepGraph", RecordedGraph)
    np.testing.assert_array_equal(generator.generate(PROMPTS, STEPS), expected[0])
    (shape,) = RecordedGraph.captures  # the token buffer's
    assert shape[0] == len(PROMPTS)
    calls = []
    compiled = generator._step.compiled
    graphs_on.setattr(
        generator._step, "compiled", lambda *args: (calls.append(1), compiled(*args))[1]
    )
    np.testing.assert_array_equal(generator.generate(PROMPTS, STEPS), expected[0])
    assert RecordedGraph.captures == [shape, shape]
    (graph,) = generator._step.graphs.values()
    # Prompts of 4 and 3 tokens, 5 new ones: steps at positions 2 to 7.
    assert (len(calls), graph.replays) == (6, 5)


def test_graph_buffers_give_the_compiled_steps_tokens_and_scores(generator, expected, graphs_on):
    """`StepGraph`'s own bookkeeping (CUDA emulated on the CPU) over the
    compiled step: greedy decoding, and beam search, whose reordered caches
    are copied into the graph's, give the tokens and scores of the
    compiled steps without graphs. The keys and values are written in
    place and kept; the slot positions and validity are not."""
    graphs_on.setattr(step_graph, "StepGraph", CpuStepGraph)
    np.testing.assert_array_equal(generator.generate(PROMPTS, STEPS), expected[0])
    tokens, scores = generator.beam_search(PROMPTS, STEPS, 3)
    assert generator._step.no_graphs is None and len(CpuStepGraph.made) == 2
    np.testing.assert_array_equal(tokens, expected[1][0])
    np.testing.assert_allclose(scores, expected[1][1], rtol=1e-6, atol=1e-6)
    for graph in CpuStepGraph.made:
        cache = graph.inputs[graph.cache_leaves]
        kept = [len(leaf.shape) for leaf, in_place in zip(cache, graph.in_place) if in_place]
        # Two tables a layer, (rows, capacity, heads, size); nothing else.
        assert kept == [4] * 2 * CONFIG["num_hidden_layers"]


def test_a_graphed_step_does_not_walk_its_arguments_with_keras_tree(
    generator, expected, graphs_on
):
    """A step's host work is small next to the graph it launches: on torch
    `keras.tree` rebuilds a structure level by level (about 370 µs for a
    12-layer cache on the project's CPU), so the steps (`CompiledStep`,
    `StepGraph`) flatten their arguments with `step_graph.flatten`."""
    graphs_on.setattr(step_graph, "StepGraph", CpuStepGraph)
    walks, inside_a_step = [], []
    for name in ("flatten", "pack_sequence_as", "map_structure"):
        original = getattr(keras.tree, name)

        def counted(*args, original=original, name=name, **kwargs):
            if inside_a_step:
                walks.append(name)
            return original(*args, **kwargs)

        graphs_on.setattr(keras.tree, name, counted)
    step = compiled_step.CompiledStep.__call__

    def marked(self, *args):
        inside_a_step.append(True)
        try:
            return step(self, *args)
        finally:
            inside_a_step.pop()

    graphs_on.setattr(compiled_step.CompiledStep, "__call__", marked)
    np.testing.assert_array_equal(generator.generate(PROMPTS, STEPS), expected[0])
    assert len(CpuStepGraph.made) == 1 and walks == []


def test_a_step_that_cannot_be_captured_runs_compiled_and_says_why(
    generator, expected, graphs_on, caplog
):
    graphs_on.setattr(step_graph, "StepGraph", RecordedGraph)
    RecordedGraph.refuse = True
    with caplog.at_level(logging.WARNING, logger="keras_attn"):
        tokens = generator.generate(PROMPTS, STEPS)
        again = generator.generate(PROMPTS, STEPS)
    np.testing.assert_array_equal(tokens, expected[0])
    np.testing.assert_array_equal(again, tokens)
    assert generator._step.no_graphs == "refused by the test"
    generator._step.no_graphs = None  # the module's other tests use graphs
    warnings = [r for r in caplog.records if "cannot run as a CUDA graph" in r.getMessage()]
    assert len(warnings) == 1 and "refused by the test" in warnings[0].getMessage()


def test_constants_are_the_graphs_and_a_replay_with_others_is_refused():
    """A step's arguments that are not tensors (the decoding settings'
    numbers, the sampler's `next_tokens` in `pick`) are baked into the
    graph: a replay with the same ones gives the step's outputs, one with
    another is refused rather than replaying the captured constant."""
    import torch

    def step(forward, tokens, index, cache, lengths, condition, source, pick):
        (table,) = cache
        table.add_(1.0)  # written in place and returned, as the keys and values are
        _, (scale,) = pick
        return tokens * scale + index, (table,)

    table = torch.zeros(2)
    args = (object(), torch.arange(3.0), torch.tensor(1.0), (table,), None, None, None)
    graph = CpuStepGraph(step, args + ((None, (2.0,)),))
    outputs, (written,) = graph(*args, (None, (2.0,)))
    np.testing.assert_allclose(outputs.numpy(), [1.0, 3.0, 5.0])
    assert written is table and graph.in_place == [True]
    outputs, _ = graph(args[0], torch.arange(3.0) + 1.0, torch.tensor(0.5), (table,), None, None,
                       None, (None, (2.0,)))
    np.testing.assert_allclose(outputs.numpy(), [2.5, 4.5, 6.5])
    with pytest.raises(step_graph.NotCapturable, match="differ from the captured"):
        graph(*args, (None, (3.0,)))


@pytest.mark.skipif(not cuda_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("variant, application, options", CASES)
def test_graphed_steps_give_the_compiled_steps_tokens_and_scores(
    variant, application, options, registered_test_variants, monkeypatch
):
    monkeypatch.setenv("KERAS_ATTN_TORCH_COMPILE", "1")
    model = keras_attn.build_transformer_model(
        CONFIG, variant=variant, application=application, **options
    )
    generator = generator_module.Generator(model)
    start = {"start_token_id": 0} if application == "seq2seq" else {}
    captures = []
    capture = step_graph.StepGraph.__init__

    def counted(self, function, args):
        captures.append(tuple(args[1].shape))
        capture(self, function, args)

    monkeypatch.setattr(step_graph.StepGraph, "__init__", counted)
    results = {}
    for graphs in ("0", "1"):
        monkeypatch.setenv("KERAS_ATTN_TORCH_CUDA_GRAPHS", graphs)
        greedy = generator.generate(PROMPTS, STEPS, **start)
        beams = generator.beam_search(PROMPTS, STEPS, num_beams=3, **start)
        results[graphs] = (greedy, *beams)
    assert generator._step.no_graphs is None
    # One capture per shape and call: greedy's rows, then the beams'.
    assert captures == [(2,) + captures[0][1:], (6,) + captures[1][1:]]
    np.testing.assert_array_equal(results["1"][0], results["0"][0])
    np.testing.assert_array_equal(results["1"][1], results["0"][1])
    np.testing.assert_allclose(results["1"][2], results["0"][2], rtol=1e-5, atol=1e-5)
