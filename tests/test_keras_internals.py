"""The private Keras attributes `keras_attn.keras_internals` relies on still
exist on the installed Keras, with the expected kind, and behave as relied
on. A failure names the attribute, the function that needs it and the Keras
version the module was checked against: fix that function, nothing else."""

import keras
import numpy as np
import pytest

from keras_attn import keras_internals
from keras_attn.layers import TokenEmbedding

BACKEND = keras.config.backend()
jax_only = pytest.mark.skipif(
    BACKEND != "jax", reason="the JAX trainer's loop state exists on JAX only"
)
torch_only = pytest.mark.skipif(
    BACKEND != "torch", reason="torch.nn.Module parameters exist on torch only"
)


def removed(owner, attribute, function):
    return (
        f"Keras {keras.version()} removed `{owner}.{attribute}`, which "
        f"keras_attn.keras_internals.{function} relies on (checked against "
        f"{keras_internals.CHECKED_KERAS_VERSION})"
    )


def changed(owner, attribute, function, how):
    return (
        f"Keras {keras.version()} changed `{owner}.{attribute}` ({how}), which "
        f"keras_attn.keras_internals.{function} relies on (checked against "
        f"{keras_internals.CHECKED_KERAS_VERSION})"
    )


def require_method(cls, attribute, function):
    assert callable(getattr(cls, attribute, None)), removed(cls.__name__, attribute, function)


def require_attribute(instance, attribute, function):
    assert hasattr(instance, attribute), removed(type(instance).__name__, attribute, function)


class Outer(keras.layers.Layer):
    """A layer holding a `Dense` and a layer that holds another `Dense`."""

    def __init__(self):
        super().__init__()
        self.dense = keras.layers.Dense(2, name="outer_dense")
        self.inner = Inner()


class Inner(keras.layers.Layer):
    def __init__(self):
        super().__init__()
        self.dense = keras.layers.Dense(2, name="inner_dense")


def built_dense(units=2, input_dim=3):
    dense = keras.layers.Dense(units)
    dense.build((None, input_dim))
    return dense


def test_flatten_layers_walks_nested_layers():
    require_method(keras.layers.Layer, "_flatten_layers", "all_layers")
    outer = Outer()
    names = [layer.name for layer in keras_internals.all_layers(outer)]
    assert "inner_dense" in names and outer.name not in names, changed(
        "Layer", "_flatten_layers", "all_layers", f"yields {names}"
    )


def test_flatten_layers_not_recursive_stops_at_direct_sublayers():
    require_method(keras.layers.Layer, "_flatten_layers", "direct_sublayers")
    outer = Outer()
    layers = keras_internals.direct_sublayers(outer)
    assert layers == [outer.dense, outer.inner], changed(
        "Layer", "_flatten_layers", "direct_sublayers",
        f"recursive=False yields {[layer.name for layer in layers]}",
    )


def test_untrack_variable_removes_a_variable():
    require_method(keras.layers.Layer, "_untrack_variable", "drop_variable")
    dense = built_dense()
    bias = dense.bias
    keras_internals.drop_variable(dense, "bias")
    assert not any(variable is bias for variable in dense.trainable_variables), changed(
        "Layer", "_untrack_variable", "drop_variable", "the variable is still trainable"
    )
    assert not any(variable is bias for variable in dense.variables)
    assert "bias" not in vars(dense)


@torch_only
def test_track_variables_refreshes_torch_parameters():
    dense = built_dense()
    require_method(keras.layers.Layer, "_track_variables", "sync_torch_parameters")
    keras_internals.drop_variable(dense, "bias")
    keras_internals.sync_torch_parameters(dense)
    shapes = [tuple(parameter.shape) for parameter in dense.parameters()]
    assert shapes == [(3, 2)], changed(
        "TorchLayer", "_track_variables", "sync_torch_parameters",
        f"the parameters after dropping the bias have shapes {shapes}",
    )


def test_quantized_call_computes_a_quantized_dense():
    dense = built_dense()
    dense.quantize("int8")
    require_method(keras.layers.Layer, "quantized_call", "quantized_call")
    inputs = np.random.default_rng(0).normal(size=(4, 3)).astype("float32")
    np.testing.assert_allclose(
        keras.ops.convert_to_numpy(keras_internals.quantized_call(dense, inputs)),
        keras.ops.convert_to_numpy(dense(inputs)),
        rtol=1e-6,
        atol=1e-6,
        err_msg=changed("Layer", "quantized_call", "quantized_call", "differs from __call__"),
    )


@pytest.mark.parametrize("with_lora", [False, True])
def test_int8_dense_without_gradient_equals_keras_int8_call(with_lora):
    """Bit-equal to `Dense._int8_call` (the same operations), with and
    without LoRA; a Dense subclass with its own int8 call is not "plain"."""
    dense = keras.layers.Dense(2, activation="relu")
    dense.build((None, 3))
    dense.quantize("int8")
    if with_lora:
        dense.enable_lora(2)
        dense.lora_kernel_b.assign(np.full(dense.lora_kernel_b.shape, 0.3, "float32"))
    assert keras_internals.plain_int8_dense(dense)
    for name in ("_kernel", "kernel_scale", "inputs_quantizer"):
        assert hasattr(dense, name), changed(
            "Dense", name, "int8_dense_without_gradient", "is gone"
        )
    inputs = np.random.default_rng(0).normal(size=(4, 3)).astype("float32")
    np.testing.assert_array_equal(
        keras.ops.convert_to_numpy(keras_internals.int8_dense_without_gradient(dense, inputs)),
        keras.ops.convert_to_numpy(dense(inputs)),
        err_msg=changed(
            "Dense", "_int8_call", "int8_dense_without_gradient", "computes differently"
        ),
    )

    class OwnInt8(keras.layers.Dense):
        def _int8_call(self, inputs, training=None):
            return super()._int8_call(inputs, training) * 2

    own = OwnInt8(2)
    own.build((None, 3))
    own.quantize("int8", type_check=False)
    assert not keras_internals.plain_int8_dense(own)


def test_int8_call_is_the_hook_of_a_quantized_embedding():
    require_method(keras.layers.Embedding, "_int8_call", "embedding_int8_lookup")
    calls = []

    class Recording(keras.layers.Embedding):
        def _int8_call(self, inputs, training=None):
            calls.append(inputs)
            return keras_internals.embedding_int8_lookup(self, inputs, training=training)

    embedding = Recording(5, 3)
    embedding.build()
    expected = keras.ops.convert_to_numpy(embedding(np.array([[1, 4]])))
    embedding.quantize("int8", type_check=False)  # Keras refuses subclasses by default
    looked_up = keras.ops.convert_to_numpy(embedding(np.array([[1, 4]])))
    assert calls, changed(
        "Embedding", "_int8_call", "embedding_int8_lookup",
        "an int8 layer's __call__ no longer calls it; TokenEmbedding overrides it",
    )
    np.testing.assert_allclose(looked_up, expected, rtol=0.02, atol=0.02)


def test_embeddings_holds_the_int8_table_with_lora_enabled():
    embedding = TokenEmbedding(5, 3)
    embedding.build()
    embedding.quantize("int8")
    embedding.enable_lora(1)
    require_attribute(embedding, "_embeddings", "int8_embedding_table")
    table = keras_internals.int8_embedding_table(embedding)
    assert keras.backend.standardize_dtype(table.dtype) == "int8", changed(
        "Embedding", "_embeddings", "int8_embedding_table",
        f"holds {table.dtype}, not the int8 table",
    )
    assert tuple(table.shape) == (5, 3)


class Interrupt(keras.callbacks.Callback):
    """Records the JAX trainer's loop state after the first step, then
    raises, as an error inside a loop would. It holds the model itself:
    `Callback.model` would write the loop's state back first."""

    def __init__(self, model):
        super().__init__()
        self.watched = model

    def on_train_batch_end(self, batch, logs=None):
        model = self.watched
        self.state = getattr(model, "_jax_state", None)
        self.synced = getattr(model, "_jax_state_synced", None)
        self.detached = [variable._value is None for variable in model.trainable_variables]
        raise KeyboardInterrupt


@jax_only
def test_jax_state_and_value_are_the_loop_state_and_detached_values():
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1)])
    model.compile(optimizer="sgd", loss="mse")
    require_attribute(model, "_jax_state_synced", "end_interrupted_jax_loop")
    interrupt = Interrupt(model)
    with pytest.raises(KeyboardInterrupt):
        model.fit(np.ones((2, 3)), np.ones((2, 1)), batch_size=1, callbacks=[interrupt], verbose=0)
    assert isinstance(interrupt.state, dict), removed(
        "JAXTrainer", "_jax_state", "end_interrupted_jax_loop"
    )
    assert interrupt.synced is False, changed(
        "JAXTrainer", "_jax_state_synced", "end_interrupted_jax_loop",
        f"is {interrupt.synced!r} during a loop",
    )
    assert interrupt.detached and all(interrupt.detached), changed(
        "Variable", "_value", "keeping_jax_arrays",
        "a compiled loop no longer sets it to None while it runs",
    )
    keras_internals.end_interrupted_jax_loop(model)
    assert model._jax_state is None and model._jax_state_synced is True

    kernel = model.trainable_variables[0]
    value = kernel.value
    kernel._value = None  # as a compiled loop leaves it
    kernel._value = value  # as keeping_jax_arrays gives it back
    np.testing.assert_array_equal(
        keras.ops.convert_to_numpy(kernel.value),
        keras.ops.convert_to_numpy(value),
        err_msg=changed(
            "Variable", "_value", "keeping_jax_arrays", "setting it no longer reattaches"
        ),
    )


class Guarded(keras_internals.JaxLoopState, keras.Model):
    pass


def guarded_model():
    inputs = keras.Input((3,))
    model = Guarded(inputs, keras.layers.Dense(2)(inputs))
    model.compile(optimizer=keras.optimizers.SGD(0.1, momentum=0.9), loss="mse")
    return model


@jax_only
def test_jax_loop_state_gathers_what_keras_gathers():
    """`JaxLoopState._get_jax_state` is Keras' own with copies added: the
    same arrays for every combination of groups, and the same detaching."""
    require_method(keras.Model, "_get_jax_state", "JaxLoopState")
    model = guarded_model()
    model.train_on_batch(np.ones((2, 3)), np.ones((2, 2)))  # the optimizer's variables
    model.evaluate(np.ones((2, 3)), np.ones((2, 2)), verbose=0)  # the metrics'
    for flags in [(True, True, False, False), (True, True, True, True), (True, True, False, True)]:
        names = ["trainable_variables", "non_trainable_variables", "optimizer_variables",
                 "metrics_variables"]
        which = dict(zip(names, flags))
        ours = model._get_jax_state(**which)
        theirs = keras.Model._get_jax_state(model, **which)
        assert [[id(a) for a in group] for group in ours] == [
            [id(a) for a in group] for group in theirs
        ], changed("JAXTrainer", "_get_jax_state", "JaxLoopState", f"it gathers otherwise ({which})")
    detached = model._get_jax_state(trainable_variables=True, purge_model_variables=True)
    assert all(variable._value is None for variable in model.trainable_variables)
    with pytest.raises(KeyboardInterrupt):
        with keras_internals.keeping_jax_arrays(model):
            raise KeyboardInterrupt
    assert [variable._value for variable in model.trainable_variables] == detached[0]


@jax_only
def test_jax_loop_state_never_hands_a_step_an_array_another_variable_holds():
    """On JAX `a.assign(b)` stores `b`'s array in `a`, as Keras' EMA does
    when it finalizes: a step donating the weight's array deleted the
    average's, and a training step handed the one array twice."""
    model = guarded_model()
    model.train_on_batch(np.ones((2, 3)), np.ones((2, 2)))
    kernel = model.trainable_variables[0]
    (momentum,) = [v for v in model.optimizer.variables if v.shape == kernel.shape]
    momentum.assign(kernel)
    assert momentum._value is kernel._value, changed(
        "Variable", "_value", "JaxLoopState", "assign no longer shares the array (harmless)"
    )
    expected = np.asarray(kernel.value).copy()
    model.predict_on_batch(np.ones((1, 3)))  # donates the kernel's array
    np.testing.assert_array_equal(np.asarray(momentum.value), expected)
    model.train_on_batch(np.ones((2, 3)), np.ones((2, 2)))  # donates both
    assert np.isfinite(np.asarray(kernel.value)).all()
    np.testing.assert_array_equal(np.asarray(momentum.value).shape, expected.shape)


def test_zero_pad_pads_concrete_tensors_with_the_backend_and_symbolic_ones_with_ops():
    from keras.src import backend

    for attribute in ("any_symbolic_tensors", "numpy"):
        require_attribute(backend, attribute, "zero_pad")
    require_method(backend.numpy, "pad", "zero_pad")
    x = np.arange(6, dtype="float32").reshape(2, 3)
    padded = keras_internals.zero_pad(keras.ops.convert_to_tensor(x), [(0, 0), (1, 2)])
    np.testing.assert_array_equal(keras.ops.convert_to_numpy(padded), np.pad(x, [(0, 0), (1, 2)]))
    symbolic = keras_internals.zero_pad(keras.KerasTensor((None, 3)), [(0, 0), (1, 2)])
    assert isinstance(symbolic, keras.KerasTensor) and symbolic.shape == (None, 6)


def test_adam_private_update_hooks_and_slots_exist():
    """`keras_attn.optimizers.AdamW` overrides `_backend_update_step` (which
    `apply` calls with the gradients, variables and learning rate) and
    reads Adam's slots by `_get_variable_index`."""
    from keras.src.optimizers.base_optimizer import BaseOptimizer

    require_method(BaseOptimizer, "_backend_update_step", "AdamW (keras_attn.optimizers)")
    optimizer = keras.optimizers.AdamW(amsgrad=True)
    optimizer.build([keras.Variable(np.zeros(2, "float32"))])
    for attribute in ("_momentums", "_velocities", "_velocity_hats", "_get_variable_index"):
        require_attribute(optimizer, attribute, "fused_adam_update")


@torch_only
def test_torch_adam_parallel_update_step_exists():
    from keras.src.backend.torch.optimizers import torch_adam

    require_method(torch_adam.Adam, "_parallel_update_step", "torch_adam_update")


def small_functional_model():
    """`Input -> Dense -> LayerNormalization`, and `Dense -> Add` of both."""
    inputs = keras.Input((3,), name="features")
    hidden = keras.layers.Dense(4, name="first")(inputs)
    normed = keras.layers.LayerNormalization(name="norm")(hidden)
    outputs = keras.layers.Add(name="sum")([hidden, normed])
    return keras.Model(inputs, outputs)


def test_functional_steps_are_the_nodes_functional_call_runs_in_order():
    model = small_functional_model()
    require_attribute(model, "_nodes_by_depth", "functional_steps")
    steps = keras_internals.functional_steps(model)
    assert [operation.name for operation, *_ in steps] == ["first", "norm", "sum"], changed(
        "Functional", "_nodes_by_depth", "functional_steps", "other nodes or order"
    )
    operation, args, kwargs, outputs = steps[2]
    assert isinstance(args[0], list) and all(isinstance(x, keras.KerasTensor) for x in args[0])
    assert kwargs == {} and outputs == [model.output]
    features = np.ones((2, 3), "float32")
    require_method(type(model), "_standardize_inputs", "standardized_inputs")
    (standardized,) = keras_internals.standardized_inputs(model, {"features": features})
    np.testing.assert_array_equal(keras.ops.convert_to_numpy(standardized), features)


def test_call_signature_context_arguments_and_input_conversion_flags():
    dropout, dense = keras.layers.Dropout(0.5), built_dense()
    for attribute in ("_call_signature", "_call_has_context_arg", "_call_context_args",
                      "_convert_input_args"):
        require_attribute(dense, attribute, "takes_training / call_signature / converts_inputs")
    norm = keras.layers.LayerNormalization()
    assert keras_internals.takes_training(dropout) and not keras_internals.takes_training(norm)
    assert keras_internals.takes_context(dense, "training")
    assert list(keras_internals.call_signature(dropout).parameters) == ["inputs", "training"]
    assert keras_internals.converts_inputs(dense) is True
    assert not keras_internals.needs_keras_call(dense)
    dense.activity_regularizer = keras.regularizers.L2(0.1)
    assert keras_internals.needs_keras_call(dense)


def test_keras_masks_are_read_set_and_computed_as_call_sets_them():
    ids = keras.ops.convert_to_tensor(np.array([[3, 0]], "int32"))
    embedding = keras.layers.Embedding(5, 2, mask_zero=True)
    expected = embedding(ids)
    require_method(keras.layers.Layer, "_set_mask_metadata", "set_output_masks")
    outputs = embedding.call(ids)
    assert keras_internals.keras_mask(outputs) is None
    keras_internals.set_output_masks(embedding, ids, outputs, None)
    np.testing.assert_array_equal(
        keras.ops.convert_to_numpy(keras_internals.keras_mask(outputs)),
        keras.ops.convert_to_numpy(keras_internals.keras_mask(expected)),
        err_msg=changed("Layer", "_set_mask_metadata", "set_output_masks", "another mask"),
    )
    assert not keras_internals.autocast_scope_active()


@torch_only
def test_torch_dense_is_what_dense_call_computes():
    import torch

    require_attribute(built_dense(), "_kernel", "torch_dense")
    rng = np.random.default_rng(0)
    for dense in (keras.layers.Dense(5, activation="gelu"), keras.layers.Dense(5, use_bias=False)):
        dense.build((None, 3))
        if dense.bias is not None:
            dense.bias.assign(rng.normal(size=5).astype("float32"))
        inputs = torch.tensor(rng.normal(size=(2, 4, 3)).astype("float32"), requires_grad=True)
        assert keras_internals.plain_torch_dense(dense, inputs)
        ours = keras_internals.torch_dense(dense, inputs)
        (gradient,) = torch.autograd.grad(ours.sum(), inputs)
        expected = dense.call(inputs)
        (expected_gradient,) = torch.autograd.grad(expected.sum(), inputs)
        np.testing.assert_array_equal(
            ours.detach().numpy(), expected.detach().numpy(),
            err_msg=changed("Dense", "call", "torch_dense", "computes otherwise"),
        )
        np.testing.assert_array_equal(gradient.numpy(), expected_gradient.numpy())
    lora = built_dense()
    lora.enable_lora(1)
    quantized = built_dense()
    quantized.quantize("int8")
    inputs = torch.ones(2, 3)
    assert not keras_internals.plain_torch_dense(lora, inputs)
    assert not keras_internals.plain_torch_dense(quantized, inputs)
    assert not keras_internals.plain_torch_dense(built_dense(), inputs.double())


def test_reshape_uses_the_backend_for_concrete_tensors_and_ops_for_symbolic_ones():
    from keras.src import backend

    require_method(backend.numpy, "reshape", "reshape")
    x = np.arange(12, dtype="float32").reshape(2, 6)
    shape = keras.ops.shape(keras.ops.convert_to_tensor(x))
    reshaped = keras_internals.reshape(keras.ops.convert_to_tensor(x), (shape[0], -1, 3))
    np.testing.assert_array_equal(keras.ops.convert_to_numpy(reshaped), x.reshape(2, 2, 3))
    symbolic = keras_internals.reshape(keras.KerasTensor((None, 6)), (-1, 2, 3))
    assert isinstance(symbolic, keras.KerasTensor) and symbolic.shape == (None, 2, 3)


@torch_only
def test_torch_layer_norm_is_what_layer_normalization_call_computes():
    import torch

    rng = np.random.default_rng(0)
    for options in ({}, {"center": False}, {"scale": False, "epsilon": 1e-12}):
        norm = keras.layers.LayerNormalization(**options)
        norm.build((None, 4, 6))
        for weight in norm.weights:
            weight.assign(rng.normal(size=weight.shape).astype("float32"))
        inputs = torch.tensor(rng.normal(size=(2, 4, 6)).astype("float32"), requires_grad=True)
        assert keras_internals.plain_torch_layer_norm(norm, inputs)
        ours = keras_internals.torch_layer_norm(norm, inputs)
        (gradient,) = torch.autograd.grad(ours.sum(), inputs)
        expected = norm.call(inputs)
        (expected_gradient,) = torch.autograd.grad(expected.sum(), inputs)
        np.testing.assert_array_equal(
            ours.detach().numpy(), expected.detach().numpy(),
            err_msg=changed("LayerNormalization", "call", "torch_layer_norm", "computes otherwise"),
        )
        np.testing.assert_array_equal(gradient.numpy(), expected_gradient.numpy())
    inputs = torch.ones(2, 4, 6)
    for other in (
        keras.layers.LayerNormalization(axis=1),
        keras.layers.LayerNormalization(rms_scaling=True),
        keras.layers.LayerNormalization(dtype="bfloat16"),
    ):
        other.build((None, 4, 6))
        assert not keras_internals.plain_torch_layer_norm(other, inputs)
    assert not keras_internals.plain_torch_layer_norm(norm, inputs.double())


def test_a_merge_of_an_unmasked_input_gets_no_mask_as_call_gives_it():
    from keras.src.layers.merging.base_merge import Merge

    require_method(Merge, "compute_mask", "set_output_masks")
    x = keras.ops.convert_to_tensor(np.ones((1, 2, 3), "float32"))
    mask = keras.ops.convert_to_tensor(np.array([[True, False]]))
    for layer in (keras.layers.Add(), keras.layers.Multiply()):
        layer.build([(1, 2, 3), (1, 2, 3)])
        for masks in ([None, None], [mask, None], [mask, mask]):
            outputs = layer.call([x, x])
            keras_internals.set_output_masks(layer, [x, x], outputs, masks)
            expected = layer.compute_mask([x, x], masks)
            got = keras_internals.keras_mask(outputs)
            assert (got is None) == (expected is None), changed(
                "Merge", "compute_mask", "set_output_masks", "another mask"
            )
            if expected is not None:
                np.testing.assert_array_equal(
                    keras.ops.convert_to_numpy(got), keras.ops.convert_to_numpy(expected)
                )


def test_jit_compile_is_what_compile_sets_and_the_trainer_reads():
    """`jit_compile_requested` reads what `compile(jit_compile=...)` set,
    and `jit_compile_off` hides it from the step functions Keras makes
    inside (it reads `_jit_compile` when it makes them), giving it back."""
    inputs = keras.Input((3,))
    model = keras.Model(inputs, keras.layers.Dense(2)(inputs))
    model.compile(optimizer="sgd", loss="mse", jit_compile=True)
    assert keras_internals.jit_compile_requested(model), changed(
        "Trainer", "_jit_compile", "jit_compile_requested", "compile(jit_compile=True) left no True"
    )
    with keras_internals.jit_compile_off(model):
        assert model.jit_compile is False, changed(
            "Trainer", "jit_compile", "jit_compile_off", "the property does not read _jit_compile"
        )
    assert model.jit_compile is not False and keras_internals.jit_compile_requested(model)
    model.compile(optimizer="sgd", loss="mse", jit_compile=False)
    assert not keras_internals.jit_compile_requested(model)
