"""A functional model's eager torch pass without Keras' per-layer `__call__`."""

import keras

from keras_attn import keras_internals
from keras_attn.torch_runtime.direct_call import call_directly
from keras_attn.torch_runtime.direct_call import calls_directly
from keras_attn.torch_runtime.compiled_blocks import CompiledBlocks


class DirectGraph:
    """The graph of a functional `keras.Model`, run eagerly on torch with each
    layer computed by its own `call` wherever that is exact.

    It runs the nodes of `Functional.call` in the same order
    (`keras_internals.functional_steps`), with the same arguments and
    `training`, computing a layer by `call_directly` where `calls_directly`
    allows and through `__call__` otherwise. Outputs, Keras masks, dropout
    draws and gradients are `Functional.call`'s. `TransformerModel.call` uses
    it on torch outside `torch.compile` unless `KERAS_ATTN_DIRECT_PASS=0`.

    Args:
        model: a functional `keras.Model` (a `keras_attn.TransformerModel`).

    Example:

    ```python
    import keras
    import numpy as np
    import keras_attn
    from keras_attn.torch_runtime.direct_graph import DirectGraph

    model = keras_attn.build_transformer_model(dict(
        vocab_size=50, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
        intermediate_size=32, max_position_embeddings=16, type_vocab_size=2,
    ))
    inputs = {"token_ids": np.array([[5, 6, 7, 0]], "int32"),
              "segment_ids": np.zeros((1, 4), "int32")}
    if keras.config.backend() == "torch":
        outputs = DirectGraph(model)(model, inputs)  # what model(inputs) runs
    ```
    """

    def __init__(self, model):
        self.input_keys = [id(tensor) for tensor in model.inputs]
        self.functional_steps = keras_internals.functional_steps(model)
        self.steps = [
            (operation, _filler(args), _filler(kwargs), _keys(args, kwargs),
             [id(tensor) for tensor in outputs])
            for operation, args, kwargs, outputs in self.functional_steps
        ]
        self.output_structure = model.output
        self.output_keys = [id(tensor) for tensor in keras.tree.flatten(model.output)]
        self.compiled_blocks = None

    def __call__(self, model, inputs, training=None, blocks_template=None):
        """`model(inputs, training=training)`'s outputs (on torch, eagerly;
        with a `blocks_template`, the `keras_attn.Transformer` whose blocks
        are the model's, each block by its compiled program,
        `keras_attn.torch_runtime.compiled_blocks.CompiledBlocks`)."""
        values = dict(zip(self.input_keys, keras_internals.standardized_inputs(model, inputs)))
        blocks = None
        if blocks_template is not None:
            if self.compiled_blocks is None:
                self.compiled_blocks = CompiledBlocks(model, blocks_template, self.functional_steps)
            blocks = self.compiled_blocks
        for item in blocks.schedule if blocks is not None else range(len(self.steps)):
            if isinstance(item, int):
                self._run_step(item, values, training)
            elif not blocks.run(item, values, training):
                for index in item.steps:
                    self._run_step(index, values, training)
        return self._outputs(model, values)

    def _run_step(self, index, values, training):
        """Computes step `index` on the computed `values` (by `KerasTensor`
        id), adding its outputs; nothing for a node not computable from
        them (as `Functional.call`)."""
        operation, fill_args, fill_kwargs, needed, output_keys = self.steps[index]
        if any(key not in values for key in needed):
            return
        args, kwargs = fill_args(values), fill_kwargs(values)
        if isinstance(operation, keras.layers.Layer) and calls_directly(operation, args, kwargs):
            if training is not None and keras_internals.takes_training(operation):
                kwargs["training"] = training
            outputs = call_directly(operation, *args, **kwargs)
        else:
            if training is not None and keras_internals.takes_context(operation, "training"):
                kwargs["training"] = training
            outputs = operation(*args, **kwargs)
        if not isinstance(outputs, (list, tuple, dict)):
            values[output_keys[0]] = outputs
        else:
            values.update(zip(output_keys, keras.tree.flatten(outputs)))

    def _outputs(self, model, values):
        """The model's outputs from the computed `values`."""
        missing = [index for index, key in enumerate(self.output_keys) if key not in values]
        if missing:
            raise ValueError(
                f"Output {missing[0]} of model {model.name!r} is not connected to its inputs."
            )
        outputs = keras.tree.pack_sequence_as(
            self.output_structure, [values[key] for key in self.output_keys]
        )
        if isinstance(outputs, (list, tuple)) and len(outputs) == 1:
            return outputs[0]
        return outputs


def _keys(args, kwargs):
    """The ids of the `KerasTensor`s in a node's arguments."""
    return [
        id(value) for value in keras.tree.flatten((args, kwargs))
        if isinstance(value, keras.KerasTensor)
    ]


def _filler(structure):
    """A function of the computed values (by `KerasTensor` id) returning
    `structure` with each `KerasTensor` in it replaced by its value (None
    where none was computed, as Keras' `SymbolicArguments.fill_in`)."""
    if isinstance(structure, keras.KerasTensor):
        key = id(structure)
        return lambda values: values.get(key)
    if type(structure) in (list, tuple):
        parts = [_filler(item) for item in structure]
        kind = type(structure)
        return lambda values: kind([part(values) for part in parts])
    if type(structure) is dict:
        parts = {name: _filler(item) for name, item in structure.items()}
        return lambda values: {name: part(values) for name, part in parts.items()}
    if keras.tree.is_nested(structure):
        # Another container (a namedtuple, ...): Keras' own traversal.
        return lambda values: keras.tree.map_structure(
            lambda item: values.get(id(item)) if isinstance(item, keras.KerasTensor) else item,
            structure,
        )
    return lambda values: structure
