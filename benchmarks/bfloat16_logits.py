"""How far bfloat16 logits are from transformers' for Gemma 2, Gemma 3 and Phi-3.

The tiny random models of the tests (`tests/models/test_llama_families.py`'s
gemma2 and gemma3_text, `tests/models/test_phi3.py`'s Phi-3 with LongRoPE),
with the tests' enlarged weights, and the same shapes with transformers'
own initialisation (weights of standard deviation 0.02, logits near 0):
each saved once with `save_pretrained`, then run on the tests' two rows (8
and 5 real tokens, right-padded; Phi-3's 11 tokens, past LongRoPE's switch
at 8), and Gemma 2's last 16 positions of 1024 random tokens (where a
rotary angle rounded to bfloat16 would be off by radians), the largest
absolute difference over real positions of:

- keras_attn float32 against transformers float32 (the parity bar, 1e-4);
- keras_attn under the dtype policy `bfloat16` (variables and compute)
  against transformers cast to bfloat16 (`model.to(torch.bfloat16)`);
- each of those two against transformers float32: what bfloat16 costs
  each library on its own;
- keras_attn under `mixed_bfloat16` (float32 variables, bfloat16 compute)
  against transformers float32.

transformers runs eager attention (the path that soft-caps Gemma 2's
scores). Results go to `benchmarks/results/bfloat16_logits_<backend>.json`.

    KERAS_BACKEND=jax python benchmarks/bfloat16_logits.py

Not part of the test suite.
"""

import argparse
import os
import sys
import tempfile

import keras
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import keras_attn  # noqa: E402
from bert_base import BACKEND  # noqa: E402
from bert_base import write_result  # noqa: E402
from tests.checkpoint_files import perturb  # noqa: E402
from tests.models import test_llama_families  # noqa: E402
from tests.models import test_phi3  # noqa: E402

MODELS = {
    "gemma2": ("Gemma2Config", {**test_llama_families.COMMON,
                                **test_llama_families.FAMILIES["gemma2"][2]}),
    "gemma3_text": ("Gemma3TextConfig", {**test_llama_families.COMMON,
                                         **test_llama_families.FAMILIES["gemma3_text"][2]}),
    "phi3": ("Phi3Config", test_phi3.CONFIG),
}


def reference_model(name, enlarged):
    """A transformers model of `MODELS[name]` in float32, eager attention;
    `enlarged`: with the tests' perturbation and added block weights."""
    import torch
    import transformers

    config_class, fields = MODELS[name]
    torch.manual_seed(0)
    config = getattr(transformers, config_class)(**fields)
    model = transformers.AutoModelForCausalLM.from_config(config, attn_implementation="eager")
    if enlarged:
        model = perturb(model, seed=1)
        generator = torch.Generator().manual_seed(7)
        with torch.no_grad():
            for key, parameter in model.named_parameters():
                if key.startswith("model.layers.") and parameter.ndim == 2:
                    parameter.add_(0.4 * torch.randn(parameter.shape, generator=generator))
    return model.eval()


def inputs(name, length=None):
    """The tests' token ids and padding mask for `name`; given `length`,
    one row of that many random tokens (no padding)."""
    if length is not None:
        return np.random.default_rng(0).integers(3, 90, size=(1, length)), np.ones((1, length), "int64")
    if name == "phi3":
        ids = test_phi3.IDS
        return ids, (ids != 0).astype("int64") | np.array([[1], [0]])
    return test_llama_families.IDS, test_llama_families.RIGHT


def ours(directory, policy, ids, mask):
    """keras_attn's float32 logits of the model in `directory`, built under
    the dtype policy `policy`."""
    previous = keras.config.dtype_policy()
    keras.config.set_dtype_policy(policy)
    try:
        model = keras_attn.build_transformer_model(directory, padding_mask_input=True)
        logits = model({"token_ids": ids, "padding_mask": mask})
    finally:
        keras.config.set_dtype_policy(previous)
    return keras.ops.convert_to_numpy(keras.ops.cast(logits, "float32"))


def theirs(model, dtype, ids, mask):
    import torch

    with torch.no_grad():
        cast = model.to(getattr(torch, dtype))
        logits = cast(torch.tensor(ids), attention_mask=torch.tensor(mask)).logits
        model.to(torch.float32)
    return logits.float().numpy()


def measure(name, enlarged, length=None):
    ids, mask = inputs(name, length)
    real = mask.astype(bool)
    if length is not None:
        real[:, : length - 16] = False  # the last 16 positions: rotary angles near `length`
    reference = reference_model(name, enlarged)
    with tempfile.TemporaryDirectory() as directory:
        reference.save_pretrained(directory)
        logits = {
            "keras_attn float32": ours(directory, "float32", ids, mask),
            "keras_attn bfloat16": ours(directory, "bfloat16", ids, mask),
            "keras_attn mixed_bfloat16": ours(directory, "mixed_bfloat16", ids, mask),
        }
    logits["transformers float32"] = theirs(reference, "float32", ids, mask)
    logits["transformers bfloat16"] = theirs(reference, "bfloat16", ids, mask)

    def difference(first, second):
        return float(np.abs(logits[first][real] - logits[second][real]).max())

    row = {
        "model": name, "weights": "tests' enlarged" if enlarged else "transformers' init",
        "positions": "the tests' rows" if length is None else f"{length - 16} to {length - 1}",
        "largest_logit": float(np.abs(logits["transformers float32"][real]).max()),
        "float32_vs_transformers_float32": difference("keras_attn float32", "transformers float32"),
        "bfloat16_vs_transformers_bfloat16": difference("keras_attn bfloat16", "transformers bfloat16"),
        "bfloat16_vs_transformers_float32": difference("keras_attn bfloat16", "transformers float32"),
        "transformers_bfloat16_vs_transformers_float32": difference(
            "transformers bfloat16", "transformers float32"
        ),
        "mixed_bfloat16_vs_transformers_float32": difference(
            "keras_attn mixed_bfloat16", "transformers float32"
        ),
    }
    print(" | ".join(f"{value:.3g}" if isinstance(value, float) else value for value in row.values()))
    return row


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output", default=None)
    arguments = parser.parse_args()
    rows = [measure(name, enlarged) for name in MODELS for enlarged in (True, False)]
    # Far positions: an angle rounded to bfloat16 there would be off by radians.
    rows.append(measure("gemma2", True, length=1024))
    write_result({"rows": rows}, arguments.output, f"bfloat16_logits_{BACKEND}.json")


if __name__ == "__main__":
    main()
