"""`compile(jit_compile=True)` on torch compiles each Transformer block
structure once (`keras_attn.torch_runtime.compiled_blocks.CompiledBlocks`, issue
30's regional compilation): outputs, Keras masks and training steps equal
the eager pass's, every block runs compiled, one graph per structure, no
recompiles over batches."""

import concurrent.futures
import linecache
import re
import types

import keras
import numpy as np
import pytest

import keras_attn
from keras_attn import lora
from keras_attn.torch_runtime import compiled_blocks
from keras_attn.torch_runtime import direct_graph
from tests.harness import to_numpy
from tests.models.test_torch_compile import DynamoCounts
from tests.models.test_variants import CONFIG
from tests.models.test_variants import REGISTERED
from tests.models.test_variants import VARIANT_FIELDS
from tests.models.test_variants import inputs_for

pytestmark = pytest.mark.skipif(
    keras.config.backend() != "torch", reason="regional compilation is torch's"
)


def build(variant, application, blocks=2):
    """`test_variants`' tiny model of `variant`, with `blocks` blocks."""
    config = dict(CONFIG, **VARIANT_FIELDS.get(variant, {}))
    config["num_hidden_layers"] = blocks
    return keras_attn.build_transformer_model(config, variant=variant, application=application)


@pytest.fixture
def dynamo_only(monkeypatch):
    """Dynamo's graphs run without inductor: what is captured and shared
    (guards, graph inputs) is dynamo's; inductor's kernels cost seconds of
    compiling per graph, so tests/models/test_torch_compile.py alone runs
    them (BERT and talking heads, predict and training)."""
    monkeypatch.setattr(compiled_blocks, "COMPILE_BACKEND", "eager")


class EagerBlockCalls:
    """Counts the block layers the eager pass computes (by `call_directly`,
    as it does every layer of a float32 block) while active. Patching what
    a compiled block traced (`Layer.__call__`, which the attention kernel's
    dropout goes through) would make it recompile."""

    def __init__(self, template, monkeypatch):
        self.count = 0
        blocks = [*template.encoder_blocks, *template.blocks]
        block_layers = {id(layer) for block in blocks for layer in block.layers}

        def counting(function):
            def counted(layer, *args, **kwargs):
                self.count += id(layer) in block_layers
                return function(layer, *args, **kwargs)

            return counted

        monkeypatch.setattr(direct_graph, "call_directly", counting(direct_graph.call_directly))


def outputs_and_masks(outputs):
    return [
        (to_numpy(x), None if getattr(x, "_keras_mask", None) is None else to_numpy(x._keras_mask))
        for x in keras.tree.flatten(outputs)
    ]


def assert_same(got, expected, tolerance=1e-5):
    assert len(got) == len(expected)
    for (value, mask), (expected_value, expected_mask) in zip(got, expected):
        np.testing.assert_allclose(value, expected_value, rtol=tolerance, atol=tolerance)
        assert (mask is None) == (expected_mask is None)
        if mask is not None:
            np.testing.assert_array_equal(mask, expected_mask)


def check_compiled_blocks(model, inputs, monkeypatch, graphs=1, template=None):
    """`model(inputs)` compiled equals it eager, twice, in `graphs` graphs
    (one per block structure); the second call runs no block layer of
    `template`'s blocks (the model's own by default) eagerly and compiles
    nothing new."""
    expected = outputs_and_masks(model(inputs))
    model.compile(jit_compile=True)
    counts = DynamoCounts()
    first = outputs_and_masks(model(inputs))
    frames = counts.frames
    eager_calls = EagerBlockCalls(template or model.template, monkeypatch)
    second = outputs_and_masks(model(inputs))
    assert eager_calls.count == 0
    assert counts.graph_breaks == 0, dict(counts.counters["graph_break"])
    assert counts.frames == frames == counts.graphs == graphs, dict(counts.counters)
    assert_same(first, expected)
    assert_same(second, expected)


@pytest.mark.parametrize("variant", sorted(REGISTERED))
def test_every_variant_compiles_each_block_structure_once(variant, dynamo_only, monkeypatch):
    """Two blocks (three for ALBERT's one shared block) of different
    weights: a graph compiled for one block and run with its weights for
    both would give other numbers."""
    keras.utils.set_random_seed(0)
    application = REGISTERED[variant].applications[0]
    model = build(variant, application, blocks=3 if variant == "albert" else 2)
    # An encoder-decoder's encoder blocks and decoder blocks differ, and
    # so do ModernBERT's global and local attention blocks.
    two = "encoder_token_ids" in model.input_contract.names or variant == "modernbert"
    check_compiled_blocks(model, inputs_for(model), monkeypatch, graphs=2 if two else 1)


def test_reloaded_head_lora_and_int8_models_compile_their_blocks(dynamo_only, monkeypatch, tmp_path):
    keras.utils.set_random_seed(1)
    model = build("bert", "mlm", )
    inputs = inputs_for(model)
    path = str(tmp_path / "model.keras")
    model.save(path)
    check_compiled_blocks(keras.models.load_model(path), inputs, monkeypatch)

    adapted = build("bert", "encoder", )
    lora.enable_lora(adapted, 2, feed_forward=True)
    for variable in adapted.trainable_weights:  # adapters start at zero: make them count
        variable.assign(np.random.default_rng(2).normal(size=variable.shape) * 0.1)
    # The first block's input needs no gradient (the embeddings are
    # frozen), the second's does (block 0's adapters): two graphs.
    check_compiled_blocks(adapted, inputs, monkeypatch, graphs=2)

    # A head on the encoder (`with_outputs`, fine-tuning's classifier)
    # compiles the encoder's blocks.
    encoder = build("bert", "encoder")
    classifier = encoder.with_outputs(keras.layers.Dense(3)(encoder.output[:, 0]))
    check_compiled_blocks(classifier, inputs, monkeypatch, template=encoder.template)

    quantized = build("bert", "encoder")
    quantized.quantize("int8")
    expected = outputs_and_masks(quantized(inputs))
    quantized.compile(jit_compile=True)
    with pytest.warns(UserWarning, match="2 of the 2 blocks .* run eagerly.*quantized"):
        assert_same(outputs_and_masks(quantized(inputs)), expected)


def test_new_lengths_and_batch_sizes_compile_once_more_then_never(dynamo_only):
    """The first shape compiles with static sizes, the second with dynamic
    ones (dynamo's automatic dynamic shapes), which every later shape
    reuses but a batch of one (dynamo specializes sizes 0 and 1): `predict`
    does not recompile per batch."""
    keras.utils.set_random_seed(3)
    model = build("bert", "encoder")
    rng = np.random.default_rng(4)
    shapes = [(2, 8), (3, 10), (2, 12), (4, 14), (1, 16), (1, 9), (5, 11)]
    data = [
        {"token_ids": rng.integers(4, 30, size=shape).astype("int32"),
         "segment_ids": np.zeros(shape, "int32")}
        for shape in shapes
    ]
    expected = [model.predict_on_batch(inputs) for inputs in data]
    model.compile(jit_compile=True)
    counts = DynamoCounts()
    for inputs, reference in zip(data, expected):
        np.testing.assert_allclose(model.predict_on_batch(inputs), reference, rtol=1e-5, atol=1e-5)
    assert (counts.frames, counts.graphs) == (3, 3), dict(counts.counters)
    # From a thread where Keras never set its per-thread state (a server's
    # worker): the same graphs, nothing compiled again.
    with concurrent.futures.ThreadPoolExecutor(1) as worker:
        got = worker.submit(model.predict_on_batch, data[3]).result()
    np.testing.assert_allclose(got, expected[3], rtol=1e-5, atol=1e-5)
    assert (counts.frames, counts.graphs) == (3, 3), dict(counts.counters)


def test_a_mixed_precision_model_runs_its_blocks_eagerly_and_says_so(dynamo_only):
    """Keras' `__call__` casts under a mixed policy; a compiled `call`
    would not: the blocks run eagerly, with the warning naming why."""
    keras.config.set_dtype_policy("mixed_bfloat16")
    try:
        model = build("bert", "encoder")
    finally:
        keras.config.set_dtype_policy("float32")
    inputs = inputs_for(model)
    expected = outputs_and_masks(model(inputs))
    model.compile(jit_compile=True)
    counts = DynamoCounts()
    with pytest.warns(UserWarning, match="2 of the 2 blocks .* eagerly.*'mixed_bfloat16'"):
        assert_same(outputs_and_masks(model(inputs)), expected, tolerance=0)
    assert counts.frames == 0


def test_the_guards_read_the_layers_and_inputs_not_the_program(dynamo_only):
    """Dynamo checks every guard at every block call. The program (which
    value goes to which argument) and the layers' call signatures are
    written into each compiled function's code, so no guard reads them:
    passed as arguments, they were some 500 of a BERT block's 1,250 guard
    entries. (Blocks of another wiring get a function of their own:
    `test_every_variant_compiles_each_block_structure_once` counts them.)"""
    import torch

    keras.utils.set_random_seed(5)
    model = build("bert", "encoder")
    inputs = inputs_for(model)
    expected = outputs_and_masks(model(inputs))
    model.compile(jit_compile=True)
    DynamoCounts()
    assert_same(outputs_and_masks(model(inputs)), expected)
    functions = list(model._runner.direct_graph.compiled_blocks.functions.values())
    assert len(functions) == 1
    code = functions[0]._torchdynamo_orig_callable.__code__
    assert code.co_varnames[:4] == ("operations", "inputs", "training", "constants")
    # Tracebacks show the program's source.
    assert linecache.getline(code.co_filename, 1).startswith("def _run_block_program_0(")
    entries = torch._dynamo.eval_frame._debug_get_cache_entry_list(code)
    assert len(entries) == 1
    guards = entries[0].guard_manager.code_parts
    layers = sum("L['operations']" in guard for guard in guards)
    assert layers > 100  # the layers' configuration and weights stay guarded
    read = {name for guard in guards for name in re.findall(r"L\['(\w+)'\]", guard)}
    assert read <= {"operations", "inputs", "training", "constants"}, read
    assert not any("L['constants'][" in guard for guard in guards)


def test_constants_that_are_not_literals_are_read_from_the_constants(dynamo_only):
    """A program's constant arguments are written into its code where
    `repr` gives them back (here -0.5); others (a numpy scalar, infinity)
    are read from the function's `constants` argument."""
    import torch

    def operation(x, offset, scale=None, limit=None):
        return torch.clamp(x * scale + offset, max=limit)

    args = ("tuple", (("value", 0), ("constant", -0.5)))
    kwargs = ("dict", (("scale", ("constant", np.float32(3.0))), ("limit", ("constant", float("inf")))))
    region = types.SimpleNamespace(
        program=(((0, args, kwargs, 1),), (1,)),
        parameters=(None,), input_keys=["x"], operations=(operation,),
    )
    body, constants = compiled_blocks._source(region)
    assert constants == (np.float32(3.0), float("inf"))
    assert "-0.5" in body
    function = compiled_blocks._compiled_program(0, body)
    x = torch.arange(4, dtype=torch.float32)
    output, mask = function(region.operations, [x], None, constants)
    np.testing.assert_array_equal(to_numpy(output), np.arange(4) * 3.0 - 0.5)
    assert mask is None
