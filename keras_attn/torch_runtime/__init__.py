"""How keras_attn runs a model on torch: `runner` picks each call's path
(`direct_graph`, `compiled_blocks`, `pass_graph`, `train_graph`, and for
`generate` `compiled_step` and `step_graph`), `settings` reads every
`KERAS_ATTN_*` switch, `openmp` hands back a thread's OpenMP workers
before another thread takes over. docs/torch.md explains the paths."""
