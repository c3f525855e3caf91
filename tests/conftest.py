"""Fixtures shared by every test folder: a fixed random seed per test, and
checkpoints made at test time (see tests/checkpoint_files.py)."""

import os
import re

# JAX compiles every program with XLA's optimisations mostly off. The
# suite's programs are tiny and each is run a few times, so compiling them
# is most of the JAX run (one test file: 848 compilations, 25 of its 49
# seconds); with the optimisations off the JAX run takes about a fifth less.
# The programs compute the same operations (XLA's CPU backend does no
# fast-math reassociation either way). Set before anything imports JAX;
# `JAX_DISABLE_MOST_OPTIMIZATIONS=0` in the environment turns it back on.
os.environ.setdefault("JAX_DISABLE_MOST_OPTIMIZATIONS", "1")
# The same for TensorFlow's XLA programs (`jit_compile` fit steps, the
# compiled decoding loop), which read XLA's options from `XLA_FLAGS`: the
# first two are what JAX's setting turns off in the CPU backend. Measured on
# this suite's TensorFlow generation tests: 93 s -> 75 s. The third has XLA's
# CPU backend emit fused loops with its older LLVM emitter rather than the
# MLIR fusion emitters, which take longer to compile a small program:
# compiling about 180 one-operation JAX programs took 3.2-3.4 s rather than
# 5.3-6.3 s, and tests/models/test_llama_families.py 70 s rather than 98 s
# on JAX (2026-11-27, jaxlib 0.10.2). Both emitters compute the same
# operations; the tests check keras_attn's numbers, not XLA's code
# generation. A user's own `XLA_FLAGS` is kept, and
# `JAX_DISABLE_MOST_OPTIMIZATIONS=0` leaves both backends as they ship.
if os.environ["JAX_DISABLE_MOST_OPTIMIZATIONS"] != "0":
    os.environ.setdefault(
        "XLA_FLAGS",
        "--xla_backend_optimization_level=0 --xla_llvm_disable_expensive_passes=true"
        " --xla_cpu_use_fusion_emitters=false",
    )

# The suite compiles every torch decoding step at its first call, as
# before the default became the "compile once it pays" rule (see
# `keras_attn.torch_runtime.compiled_step.torch_compile_mode`): the compiled step
# is what the torch generation tests check. Tests of the rule, the
# documentation pages and the examples (run as a reader runs them) unset it;
# tests/models and tests/serving decode eagerly (their conftest.py files).
os.environ.setdefault("KERAS_ATTN_TORCH_COMPILE", "1")

import numpy as np
import pytest

from tests.checkpoint_files import SMALL
from tests.checkpoint_files import google_config
from tests.checkpoint_files import google_name
from tests.checkpoint_files import perturb
from tests.checkpoint_files import write_tf_checkpoint


def seed_everything():
    """Keras' global seed (initialisers, dropout), Python's and numpy's
    generators, and torch's global generator. Keras seeds torch only on the
    torch backend, so on JAX and TensorFlow the random `transformers`
    models that fixtures save as checkpoints drew from an unseeded torch:
    a different checkpoint in every run (a fine-tuning test failed one CI
    run in many that way)."""
    import keras

    keras.utils.set_random_seed(0)
    try:
        import torch
    except ImportError:
        return
    torch.manual_seed(0)


class SeededFixtures:
    """Every fixture starts from the same random state, whichever test
    first needs it and whatever ran before (see `seed_everything`). A
    plugin rather than a hook of this file: pytest asks a conftest's hooks
    only about fixtures below its folder, and session fixtures belong to
    the session."""

    @pytest.hookimpl(tryfirst=True)
    def pytest_fixture_setup(self, fixturedef, request):
        seed_everything()


def pytest_configure(config):
    config.pluginmanager.register(SeededFixtures(), "keras_attn-seeded-fixtures")


@pytest.fixture(autouse=True, scope="session")
def no_requested_garbage_collections():
    """`gc.collect()` does nothing during the suite. Keras' `quantize` (and
    `TransformerModel.quantize`, once) and `clear_session` ask for a full
    collection to free the float kernels sooner; by the suite's later
    folders the process holds some 3 million objects and each such
    collection took 2-6 s (182 s of one JAX run of the suite was garbage
    collection, most of it these calls: 70 quantized variants).
    No test checks memory; Python's own generational collections still
    run. tests/models/test_quantize.py counts the calls with its own
    patch."""
    import gc

    collect = gc.collect
    gc.collect = lambda generation=2: 0
    try:
        yield
    finally:
        gc.collect = collect


@pytest.fixture(autouse=True)
def seeded():
    """Every test starts from the same random state, so a failure
    reproduces on the next run (`seed_everything`; the fixture hook has
    seeded just before this fixture is set up)."""


@pytest.fixture(scope="session")
def hf_bert_dir(tmp_path_factory):
    """A random `BertForPreTraining` saved as a Hugging Face directory."""
    transformers = pytest.importorskip("transformers")
    pytest.importorskip("torch")
    model = transformers.BertForPreTraining(transformers.BertConfig(**SMALL))
    perturb(model, seed=0).eval()
    directory = tmp_path_factory.mktemp("hf_bert")
    model.save_pretrained(directory)
    return str(directory)


@pytest.fixture(scope="session")
def hf_roberta_dir(tmp_path_factory):
    """A random `RobertaForMaskedLM` (pad id 1, positions offset by 2)."""
    transformers = pytest.importorskip("transformers")
    pytest.importorskip("torch")
    config = transformers.RobertaConfig(
        **dict(SMALL, max_position_embeddings=42, type_vocab_size=1),
        pad_token_id=1,
        layer_norm_eps=1e-5,
    )
    model = transformers.RobertaForMaskedLM(config)
    perturb(model, seed=1).eval()
    directory = tmp_path_factory.mktemp("hf_roberta")
    model.save_pretrained(directory)
    return str(directory)


@pytest.fixture(scope="session")
def tf_checkpoint_writer():
    """`write_tf_checkpoint(prefix, arrays)`, for tests that write their own
    (broken, partial) TensorFlow checkpoints."""
    return write_tf_checkpoint


@pytest.fixture(scope="session")
def tf_bert_checkpoint(hf_bert_dir, tmp_path_factory):
    """The weights of `hf_bert_dir` as Google's `bert_config.json` +
    `bert_model.ckpt`, with a `global_step` as real checkpoints have."""
    from safetensors.numpy import load_file

    state = load_file(os.path.join(hf_bert_dir, "model.safetensors"))
    arrays = {}
    for name, value in state.items():
        if "position_ids" in name or "decoder" in name:
            continue
        if re.search(r"(query|key|value|dense|intermediate\.dense|output\.dense)\.weight$", name) and value.ndim == 2:
            value = value.T
        arrays[google_name(name)] = np.ascontiguousarray(value)
    arrays["global_step"] = np.array(1000, np.int64)
    directory = tmp_path_factory.mktemp("tf_bert")
    prefix = write_tf_checkpoint(str(directory / "bert_model.ckpt"), arrays)
    config = google_config(
        os.path.join(hf_bert_dir, "config.json"), str(directory / "bert_config.json")
    )
    return config, prefix, arrays
