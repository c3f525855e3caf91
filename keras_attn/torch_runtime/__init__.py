"""How keras_attn runs a model on torch: every torch-specific way of
running one in this package.

- `runner`: one `TorchRunner` per model picks the path of each eager pass
  and training step and records why (`keras_attn.explain`, `plan`).
- `direct_call`, `direct_graph`: the eager pass with each layer computed by
  its `call` instead of Keras' `__call__`.
- `compiled_blocks`: each block structure compiled once by `torch.compile`
  under `compile(jit_compile=True)`.
- `cuda_graph`, `pass_graph`, `train_graph`, `step_graph`: captured CUDA
  graphs of whole inference passes, training steps and decoding steps.
- `compiled_step`: the compiled decoding step of `generate`;
  `compile_cache`: where torch keeps what it compiled.
- `settings`: every `KERAS_ATTN_*` switch, read and validated in one place.

docs/torch.md ("How keras_attn runs on PyTorch") explains the paths.
"""
