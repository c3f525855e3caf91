"""Which path each way of running a model takes, and why
(`keras_attn.explain`, `TransformerModel.execution_plan`)."""

import dataclasses
from typing import Dict
from typing import List
from typing import NamedTuple
from typing import Tuple

import keras

from keras_attn import keras_internals
from keras_attn.torch_runtime import direct_call
from keras_attn.torch_runtime import recorded_pass
from keras_attn.torch_runtime import runner as runner_module
from keras_attn.torch_runtime import settings

GENERATIVE = ("lm", "unilm", "seq2seq")


class Entry(NamedTuple):
    """One way of running the model: `path` (what runs) and `why`."""

    path: str
    why: str = ""


@dataclasses.dataclass(frozen=True)
class ExecutionPlan:
    """The path `model(x)`, `predict`, `fit` and `generate` take for one model
    on this backend and device, with the reason for each, and what the last
    eager calls ran (torch).

    `str(plan)` is a table; `plan.entries` maps `"call"`, `"predict"`,
    `"fit"`, `"generate"` to an `Entry`; `plan.last` maps `"inference"` and
    `"training"` to the `runner.Path` last taken (empty before a call or off
    torch); `plan.keras_layers` lists `(layer name, reason)` for layers that
    every torch pass runs through Keras' `__call__`.

    Example:

    ```python
    import keras_attn

    model = keras_attn.build_transformer_model(dict(
        vocab_size=50, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
        intermediate_size=32, max_position_embeddings=16, type_vocab_size=2,
    ))
    print(keras_attn.explain(model))
    ```
    """

    backend: str
    device: str
    entries: Dict[str, Entry]
    last: Dict[str, runner_module.Path]
    keras_layers: List[Tuple[str, str]]

    @classmethod
    def of(cls, model):
        """The plan of a `TransformerModel` as it is configured now (its
        compile settings, dtype policies, the environment's switches)."""
        backend = keras.config.backend()
        keras_layers = [
            (layer.name, reason) for layer in keras_internals.all_layers(model)
            if (reason := direct_call.keras_call_reason(layer)) is not None
        ]
        if backend == "torch":
            entries = _torch_entries(model, keras_layers)
            runner = model._torch_runner
            last = dict(runner.last) if runner is not None else {}
        else:
            entries = _xla_entries(model, backend)
            last = {}
        return cls(backend, _device(model, backend), entries, last, keras_layers)

    def __str__(self):
        lines = [f"keras_attn execution plan: backend {self.backend}, device {self.device}"]
        for name, entry in self.entries.items():
            lines.append(f"  {name:<9} {entry.path}")
            if entry.why:
                lines.append(f"  {'':<9}   why: {entry.why}")
        if self.keras_layers:
            name, reason = self.keras_layers[0]
            lines.append(
                f"  {len(self.keras_layers)} layer(s) run through Keras' __call__ in every "
                f"pass; the first, {name!r}: {reason}"
            )
        for kind, path in self.last.items():
            line = f"  last {kind} call: {path.name}"
            lines.append(line + (f" ({path.reason})" if path.reason else ""))
        return "\n".join(lines)

    def __repr__(self):
        return str(self)


def explain(model):
    """Prints `model.execution_plan()` (an `ExecutionPlan`: which path
    `model(x)`, `predict`, `fit` and `generate` take here, and why) and
    returns it."""
    plan = model.execution_plan()
    print(plan)
    return plan


def _torch_entries(model, keras_layers):
    now = settings.current()
    direct = now.direct_pass
    blocks = runner_module.compiles_blocks(model, now)
    on_gpu = "cuda" in _device(model, "torch")
    if not direct:
        forward = Entry(runner_module.PATHS["keras"], "KERAS_ATTN_DIRECT_PASS is off")
    elif blocks:
        forward = Entry(runner_module.PATHS["compiled blocks"])
    else:
        forward = Entry(
            runner_module.PATHS["direct"],
            "blocks not compiled: compile(jit_compile=True) compiles them"
            if not keras_internals.jit_compile_requested(model)
            else "blocks not compiled: KERAS_ATTN_COMPILE_BLOCKS is off"
            if not now.compile_blocks else "the model's blocks are unknown",
        )
    if keras_internals.jit_compile_requested(model) and not now.compile_blocks:
        forward = Entry(
            "Keras' torch.compile of each whole step (fit, predict); eager calls: "
            + forward.path, "KERAS_ATTN_COMPILE_BLOCKS is off",
        )
    graphs = direct and now.cuda_graphs and on_gpu
    compiled = keras_internals.jit_compile_requested(model)
    recorded = direct and not compiled and now.recorded_passes and not on_gpu
    if graphs:
        inference = Entry(
            runner_module.PATHS["cuda graph"] + " per input signature, from its second call",
            model._runner.pass_graphs.describe(),
        )
    elif recorded:
        inference = Entry(
            runner_module.PATHS["recorded pass"] + " per input signature, from its second call",
            f"{model._runner.recorded_passes.describe()}; {recorded_pass.products_described()}",
        )
    else:
        reasons = (forward.why, _no_graphs(direct, now, on_gpu),
                   _not_recorded(direct, now, on_gpu, compiled))
        inference = Entry(forward.path, "; ".join(reason for reason in reasons if reason))
    call = Entry(
        forward.path + "; under torch.no_grad() as predict",
        "autograd is on in a plain call: a replayed pass's outputs carry no gradient",
    ) if graphs or recorded else forward
    if now.cuda_graphs and on_gpu:
        fit = Entry(
            "Keras' train step captured as one CUDA graph per batch signature, from its "
            "second step", model._runner.train_graphs.describe(),
        )
    else:
        fit = Entry(
            f"Keras' train step: forward by {forward.path}; backward by torch autograd; "
            "the optimizer's update", _no_graphs(True, now, on_gpu),
        )
    generate = _torch_generate(model, now, on_gpu)
    return {"call": call, "predict": inference, "fit": fit, "generate": generate}


def _no_graphs(direct, now, on_gpu):
    if not direct:
        return "KERAS_ATTN_DIRECT_PASS is off"
    if not now.cuda_graphs:
        return "no CUDA graphs: KERAS_ATTN_TORCH_CUDA_GRAPHS is off"
    if not on_gpu:
        return "no CUDA graphs: the model is not on a GPU"
    return ""


def _not_recorded(direct, now, on_gpu, compiled):
    """Why a CPU model's inference passes are not recorded ("" on a GPU,
    where `_no_graphs` says it)."""
    if on_gpu or not direct:
        return ""
    if not now.recorded_passes:
        return "no recorded passes: KERAS_ATTN_RECORDED_PASSES is off"
    if compiled:
        return "no recorded passes: compile(jit_compile=True) compiles the pass instead"
    return ""


def _torch_generate(model, now, on_gpu):
    if model.application not in GENERATIVE:
        return Entry("not available", f"application {model.application!r} does not generate")
    mode = now.torch_compile
    if mode == "never":
        return Entry("the decoding step runs eagerly, layer by layer",
                     "KERAS_ATTN_TORCH_COMPILE is off")
    when = {
        "always": "at each shape's first step",
        "auto": "once a shape's eager steps have taken as long as compiling it",
    }[mode]
    recorded = now.recorded_steps and not on_gpu
    compiled = (
        "compiled by torch.compile from its recorded operations (KERAS_ATTN_RECORDED_STEPS)"
        if recorded else "compiled by torch.compile"
    )
    path = f"the decoding step {compiled} {when}"
    if now.cuda_graphs and on_gpu:
        return Entry(path + ", replayed as a CUDA graph from each call's second step")
    why = _no_graphs(True, now, on_gpu)
    return Entry(path, f"{why}; {recorded_pass.products_described()}" if recorded else why)


def _xla_entries(model, backend):
    compiled = getattr(model, "jit_compile", None)
    steps = (
        "one XLA program per input shape (jit_compile=True)" if compiled
        else "Keras' traced step without XLA (jit_compile=False)"
        if backend == "tensorflow" else "one jax.jit program per input shape"
    )
    generate = (
        Entry("one XLA program per prompt bucket and batch size: the whole decoding loop")
        if model.application in GENERATIVE
        else Entry("not available", f"application {model.application!r} does not generate")
    )
    return {
        "call": Entry("Keras' functional pass, op by op (eager)"),
        "predict": Entry(steps),
        "fit": Entry(steps),
        "generate": generate,
    }


def _device(model, backend):
    """Where the model's weights are."""
    variables = model.variables
    if not variables:
        return "unknown (no weights)"
    if backend == "torch":
        return str(variables[0].value.device)
    if backend == "jax":
        value = variables[0].value
        devices = getattr(value, "devices", None)
        return str(next(iter(devices()))) if devices else "unknown"
    return str(getattr(variables[0].value, "device", "") or "cpu")
