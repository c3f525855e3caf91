"""`TransformerModel`: the functional model the builder returns, with its
input contract enforced at the boundary."""

import contextlib
import json
import os

import keras
import numpy as np

from keras_attn import keras_internals
from keras_attn.concrete import torch_compiling
from keras_attn.losses.token_cross_entropy import TokenCrossEntropy
from keras_attn.torch_runtime.runner import compiles_blocks
from keras_attn.models.input_contract import InputContract
from keras_attn.models.input_contract import InputError
from keras_attn.models.input_contract import is_array_like
from keras_attn.models.transformer_config import TransformerConfig
from keras_attn.models.variants import VARIANTS
from keras_attn.models.variants import variant_name


@keras.saving.register_keras_serializable(package="keras_attn")
class TransformerModel(keras_internals.JaxLoopState, keras.Model):
    """A functional `keras.Model` that checks its inputs before computing.

    Inputs are a dict taken by name (an unknown key is an `InputError` naming
    the expected keys), or bert4keras's list `[token_ids, segment_ids]`
    (`[token_ids, segment_ids, padding_mask]` with `padding_mask_input`;
    `[token_ids]` without token types). Dtypes, ranks and shapes are checked
    on every call, values wherever they are concrete (eager calls, and each
    batch of `fit`, `evaluate` and `predict` before the compiled step); a
    model that raises inside them keeps its weights. docs/reliability.md
    lists every check.

    Args:
        inputs, outputs, name: those of a functional `keras.Model`.
        input_contract: a `keras_attn.models.InputContract`, or its config.
        application: the builder's `application` (`"lm"` and `"unilm"`
            models can `generate`), or None for a model with other outputs.
        template: the `keras_attn.Transformer` that built the model; its
            embeddings, blocks and head are what decoding runs.
        transformer: instead of `template`, its record (see
            `template_record`), as a saved model's config holds it; the
            template is rebuilt over the model's layers when first needed.
        **kwargs: other `keras.Model` arguments.
    """

    def __init__(self, *args, input_contract=None, application=None, template=None,
                 transformer=None, **kwargs):
        if isinstance(input_contract, dict):
            input_contract = InputContract.from_config(input_contract)
        if input_contract is None:
            raise ValueError("TransformerModel needs an `input_contract`.")
        args, kwargs = _positional_inputs(args, kwargs, input_contract)
        super().__init__(*args, **kwargs)
        self.input_contract = input_contract
        self.application = application
        self._template = template
        if template is not None:
            transformer = template_record(template)
        # As JSON text: Keras would track a dict attribute as model state.
        self._template_record = None if transformer is None else json.dumps(dict(transformer))
        self._generator = None
        self._torch_runner = None

    @property
    def named_inputs(self):
        """The model's symbolic inputs as a dict by name (`model.inputs` is a
        list in bert4keras's order)."""
        return {tensor.name: tensor for tensor in self.inputs}

    @property
    def template(self):
        """The `keras_attn.Transformer` whose layers this model runs, or None for a
        model not built by `build_transformer_model`."""
        if self._template is None and self._template_record is not None:
            record = json.loads(self._template_record)
            self._template = template_from_record(record).bind(self)
        return self._template

    def generate(self, prompts, max_new_tokens, sampler="greedy", **kwargs):
        """Continues `prompts` token by token with a key/value cache, for
        `application="lm"` and `"unilm"` models; the arguments are
        `keras_attn.generation.Generator`'s.

        ```python
        new_tokens = model.generate([[2, 17, 5]], max_new_tokens=32, sampler="top_p")
        ```
        """
        return self.generator.generate(prompts, max_new_tokens, sampler=sampler, **kwargs)

    @property
    def generator(self):
        """This model's `keras_attn.generation.Generator`, created on first
        use and kept, so its compiled loops serve every later call (and
        `AutoRegressiveDecoder`s built on this model)."""
        from keras_attn.generation.generator import Generator

        if self._generator is None:
            self._generator = Generator(self)
        return self._generator

    def with_outputs(self, outputs, name=None):
        """A model from this model's inputs to `outputs` that checks its inputs as
        this one does (a plain `keras.Model(encoder.input, outputs)` does not).

        Example:

        ```python
        encoder = keras_attn.build_transformer_model(config, checkpoint)
        probabilities = keras.layers.Dense(2, activation="softmax")(encoder.output[:, 0])
        classifier = encoder.with_outputs(probabilities, name="classifier")
        ```
        """
        model = TransformerModel(
            self.input, outputs, input_contract=self.input_contract, name=name
        )
        # Whose blocks `jit_compile=True` compiles on torch. Not saved: a
        # reloaded head model compiles Keras' whole step.
        model._base_template = self._blocks_template()
        return model

    def export(self, filepath, format="tf_saved_model", verbose=None, input_signature=None, **kwargs):
        """Exports the forward pass with Keras' `Model.export`.

        The artefact takes the model's inputs by name, each `(batch, length)`
        with both dimensions free (on JAX one shared symbolic shape; pass
        `jax2tf_kwargs={"polymorphic_shapes": ...}` to choose otherwise).
        Names, dtypes and ranks are checked while tracing, values are not.
        Supported: `tf_saved_model` on TensorFlow and JAX; `onnx` on torch
        with an `input_signature` of fixed shapes.

        ```python
        model.export("exported", format="tf_saved_model")
        ```
        """
        default_signature = input_signature is None
        if default_signature:
            # By name: the model's inputs are a list (see
            # `_positional_inputs`), which Keras would export as positional.
            input_signature = [
                {
                    tensor.name: keras.InputSpec(
                        dtype=tensor.dtype, shape=(None, *tensor.shape[1:]), name=tensor.name
                    )
                    for tensor in self.inputs
                }
            ]
        if keras.config.backend() == "jax" and format == "tf_saved_model" and default_signature:
            jax2tf_kwargs = dict(kwargs.pop("jax2tf_kwargs", None) or {})
            contract = self.input_contract
            jax2tf_kwargs.setdefault(
                "polymorphic_shapes",
                [
                    {
                        name: f"(batch, {contract.vectors[name]})"
                        if name in contract.vectors
                        else "(batch, length)"
                        for name in contract.names
                    }
                ],
            )
            kwargs["jax2tf_kwargs"] = jax2tf_kwargs
        return super().export(
            filepath, format=format, verbose=verbose, input_signature=input_signature, **kwargs
        )

    # Every way in -------------------------------------------------------------

    def quantize(self, mode=None, **kwargs):
        """Keras' `Model.quantize`, with one garbage collection at the end
        instead of Keras' one per quantized layer
        (`keras_internals.one_garbage_collection`)."""
        with keras_internals.one_garbage_collection():
            super().quantize(mode, **kwargs)

    def __call__(self, inputs, *args, **kwargs):
        return super().__call__(self._checked(inputs), *args, **kwargs)

    def call(self, inputs, training=None, mask=None, **kwargs):
        """`Functional.call`; on torch, by the path `TorchRunner` picks (the same
        numbers; see docs/torch.md). `keras_attn.explain(model)` says which."""
        if keras.config.backend() != "torch" or torch_compiling():
            # Traced by Keras' `torch.compile` of a whole step: its own pass.
            return super().call(inputs, training=training, mask=mask, **kwargs)
        return self._runner.call(
            self, inputs, training, mask, kwargs,
            lambda: super(TransformerModel, self).call(
                inputs, training=training, mask=mask, **kwargs
            ),
        )

    def train_step(self, *args):
        """Keras' `train_step` (`(data)`, on JAX `(state, data)`); on torch
        on a GPU, replayed as a captured CUDA graph at a batch signature
        seen before (`TorchRunner`)."""
        if keras.config.backend() != "torch" or torch_compiling():
            return super().train_step(*args)
        return self._runner.train_step(self, *args, super().train_step)

    @property
    def _runner(self):
        """This model's `keras_attn.torch_runtime.runner.TorchRunner`
        (torch only), made on first use."""
        if self._torch_runner is None:
            from keras_attn.torch_runtime.runner import TorchRunner

            self._torch_runner = TorchRunner()
        return self._torch_runner

    def execution_plan(self):
        """Which path `model(x)`, `predict`, `fit` and `generate` take on this
        backend and device, and why (a `keras_attn.torch_runtime.plan.ExecutionPlan`)."""
        from keras_attn.torch_runtime.plan import ExecutionPlan

        return ExecutionPlan.of(self)

    def _blocks_template(self):
        """The `keras_attn.Transformer` whose blocks are this model's: its
        template, or for a model made by `with_outputs` (in memory) the
        template of the model it was made from; None if unknown."""
        if self.template is not None:
            return self.template
        return getattr(self, "_base_template", None)

    @contextlib.contextmanager
    def _steps_without_torch_compile(self):
        """Keras' torch trainer builds its step functions without
        `torch.compile` while the blocks are compiled instead (Keras reads
        `jit_compile` when it makes them)."""
        if keras.config.backend() != "torch" or not compiles_blocks(self):
            yield
            return
        with keras_internals.jit_compile_off(self):
            yield

    def make_train_function(self, force=False):
        with self._steps_without_torch_compile():
            return super().make_train_function(force)

    def make_test_function(self, force=False):
        with self._steps_without_torch_compile():
            return super().make_test_function(force)

    def make_predict_function(self, force=False):
        with self._steps_without_torch_compile():
            return super().make_predict_function(force)

    def fit(self, x=None, y=None, *args, **kwargs):
        with self._keeping_weights():
            return super().fit(self._checked_data(x), self._checked_targets(y), *args, **kwargs)

    def evaluate(self, x=None, y=None, *args, **kwargs):
        with self._keeping_weights():
            return super().evaluate(
                self._checked_data(x), self._checked_targets(y), *args, **kwargs
            )

    def predict(self, x, *args, **kwargs):
        with self._keeping_weights():
            try:
                return super().predict(self._checked_data(x), *args, **kwargs)
            except ValueError as error:
                # numpy's message when Keras concatenates batch outputs.
                if "concatenation axis" not in str(error):
                    raise
                raise InputError(
                    "predict() received batches of different lengths, whose outputs "
                    "Keras cannot concatenate on this backend: pad every batch to one "
                    "length, e.g. dataset.padded_batch(batch_size, padded_shapes="
                    "{'token_ids': [maxlen]}), or call predict_on_batch() per batch."
                ) from error

    def train_on_batch(self, x, y=None, *args, **kwargs):
        with self._keeping_weights():
            return super().train_on_batch(
                self._batch(self._checked(x)), self._batch(self._checked_targets(y)),
                *args, **kwargs,
            )

    def test_on_batch(self, x, y=None, *args, **kwargs):
        with self._keeping_weights():
            return super().test_on_batch(
                self._batch(self._checked(x)), self._batch(self._checked_targets(y)),
                *args, **kwargs,
            )

    def predict_on_batch(self, x, *args, **kwargs):
        with self._keeping_weights():
            return super().predict_on_batch(self._batch(self._checked(x)), *args, **kwargs)

    def load_weights(self, filepath, skip_mismatch=False, **kwargs):
        """Keras' `load_weights`, all or nothing for a `.weights.h5` file: layers
        or variables that are not this model's (missing, extra, other shapes)
        are a `CheckpointError` (a ValueError) listing them, raised before
        anything is assigned. `skip_mismatch=True` and other formats load as
        Keras does."""
        if skip_mismatch or kwargs or not os.fspath(filepath).endswith(".weights.h5"):
            return super().load_weights(filepath, skip_mismatch=skip_mismatch, **kwargs)
        from keras_attn.checkpoints.keras_weights import load_weights_file

        load_weights_file(self, os.fspath(filepath))

    # Checks -----------------------------------------------------------------

    def _checked(self, inputs):
        """The model's own inputs from `inputs` (see `InputContract.check`)."""
        return self.input_contract.check(inputs)

    def _batch(self, data):
        """`data` for a `*_on_batch` step, its inputs checked; on torch with
        `jit_compile=True` numpy arrays become torch tensors first (dynamo would
        break its graph at each array)."""
        if keras.config.backend() != "torch" or not getattr(self, "jit_compile", False):
            return data
        return keras.tree.map_structure(
            lambda value: keras.ops.convert_to_tensor(value) if isinstance(value, np.ndarray) else value,
            data,
        )

    def _checked_targets(self, y):
        """`y`, its labels checked against a `TokenCrossEntropy` loss before a
        compiled step, where a bad label could only make the loss (and then
        the weights) NaN."""
        loss = getattr(self, "loss", None)
        if isinstance(loss, TokenCrossEntropy) and is_array_like(y) and len(self.outputs) == 1:
            loss.check_labels(y, self.outputs[0].shape[-1])
        return y

    def _checked_data(self, x):
        """`x` as `fit`/`predict` take it, with every batch checked before
        it reaches a compiled step."""
        if x is None:
            return x
        if isinstance(x, (dict, list, tuple)) or is_array_like(x):
            return self._checked(x)
        if _is_tf_dataset(x):
            return _checked_dataset(x, self.input_contract)
        if isinstance(x, keras.utils.PyDataset):
            return _CheckedPyDataset(x, self._checked)
        if hasattr(x, "__next__"):
            return _checked_batches(x, self._checked)
        return x

    def _keeping_weights(self):
        """On JAX, a loop that raises gives back the arrays it detached from the
        variables, with the steps it completed (`keras_internals.JaxLoopState`)."""
        if keras.config.backend() != "jax":
            return contextlib.nullcontext()
        return keras_internals.keeping_jax_arrays(self)

    def get_config(self):
        config = super().get_config()
        config["input_contract"] = self.input_contract.get_config()
        config["application"] = self.application
        if self._template_record is not None:
            config["transformer"] = json.loads(self._template_record)
        return config


def template_record(template):
    """What a saved model records of its template, to rebuild it over the
    loaded layers: the registered variant name, the `TransformerConfig` as a
    dict and the constructor's arguments; None for an unregistered class."""
    name = variant_name(type(template))
    if name is None:
        return None  # not registered: the model decodes in memory, not after loading
    return {
        "variant": name,
        "config": template.config.to_dict(),
        "arguments": template.arguments(),
    }


def template_from_record(record):
    """The template a `template_record` describes (its layers not made)."""
    variant = record["variant"]
    if variant not in VARIANTS:
        raise ValueError(
            f"The model was built with variant {variant!r}, which is not registered; "
            "import the module that registers it (keras_attn.register_variant) first."
        )
    return VARIANTS[variant](TransformerConfig(**record["config"]), **record["arguments"])


def _is_tf_dataset(value):
    return type(value).__module__.startswith("tensorflow") and hasattr(value, "element_spec")


def _features(batch):
    """The model inputs of a batch: `x` of an `(x, y, ...)` tuple, or the batch."""
    return batch[0] if isinstance(batch, tuple) else batch


def _with_checked_features(batch, check):
    """`batch` with its model inputs replaced by `check(inputs)` (a dict by
    name) and every list in its targets and sample weights a tuple, which
    Keras' TensorFlow trainer (through `tf.data`) requires."""
    if isinstance(batch, tuple):
        return (check(batch[0]),) + tuple(_lists_as_tuples(part) for part in batch[1:])
    return check(batch)


def _lists_as_tuples(value):
    if isinstance(value, (list, tuple)):
        return tuple(_lists_as_tuples(item) for item in value)
    if isinstance(value, dict):
        return {key: _lists_as_tuples(item) for key, item in value.items()}
    return value


def _checked_dataset(dataset, contract):
    """`dataset` whose elements' model inputs are checked in the pipeline:
    names, dtypes and shapes once on its element spec, lengths and values on
    every element by TensorFlow assertions built from
    `keras_attn.models.input_rules`, with `InputContract.check`'s messages."""
    import tensorflow as tf

    from keras_attn.models.input_rules import TENSORFLOW_OPS

    spec = contract.as_dict(_features(dataset.element_spec))
    contract.select({name: _SpecView(value.shape, value.dtype.name) for name, value in spec.items()})

    def assertions(inputs):
        length = tf.shape(inputs[next(iter(contract.limits))])[-1]
        checks = [
            *contract.length_checks(length, TENSORFLOW_OPS),
            *contract.value_checks(inputs, TENSORFLOW_OPS),
        ]
        # Each after the one before, so the first broken rule is reported,
        # as `check` reports it; a message is built only where it is needed.
        asserted = []
        for broken, message in checks:
            with tf.control_dependencies(asserted):
                text = tf.cond(broken, message, lambda: tf.constant(""))
                asserted = [tf.debugging.Assert(tf.logical_not(broken), [text])]
        return asserted

    def check(*element):
        element = element if len(element) > 1 else element[0]
        inputs = contract.as_dict(_features(element))
        with tf.control_dependencies(assertions(inputs)):
            # By name, so that Keras never maps a tuple onto the inputs by
            # its own order.
            checked = {name: tf.identity(inputs[name]) for name in contract.names}
            rest = tf.nest.map_structure(tf.identity, element[1:]) if isinstance(element, tuple) else ()
        return (checked,) + tuple(rest) if isinstance(element, tuple) else checked

    return dataset.map(check)


class _SpecView:
    """Shape and dtype of a `tf.TensorSpec`, as `InputContract.select` reads them."""

    def __init__(self, shape, dtype):
        self.shape = tuple(shape)
        self.dtype = dtype


def _checked_batches(iterator, check):
    for batch in iterator:
        yield _with_checked_features(batch, check)


class _CheckedPyDataset(keras.utils.PyDataset):
    """A `PyDataset` whose batches are checked as they are read."""

    def __init__(self, dataset, check):
        super().__init__(
            workers=dataset.workers,
            use_multiprocessing=dataset.use_multiprocessing,
            max_queue_size=dataset.max_queue_size,
        )
        self._dataset = dataset
        self._check = check

    def __len__(self):
        return len(self._dataset)

    @property
    def num_batches(self):
        return self._dataset.num_batches

    def __getitem__(self, index):
        return _with_checked_features(self._dataset[index], self._check)

    def on_epoch_end(self):
        self._dataset.on_epoch_end()


def _positional_inputs(args, kwargs, contract):
    """`(args, kwargs)` of a functional model's constructor with a dict of
    inputs replaced by the list in `InputContract.positional_names` order, so
    `model.inputs` reads in bert4keras's order (Keras would sort a dict by
    name); calls by name still work."""
    inputs = kwargs["inputs"] if "inputs" in kwargs else (args[0] if args else None)
    if not isinstance(inputs, dict):
        return args, kwargs
    order = [name for name in contract.positional_names if name in inputs]
    ordered = [inputs[name] for name in order]
    ordered += [tensor for name, tensor in inputs.items() if name not in order]
    if "inputs" in kwargs:
        return args, {**kwargs, "inputs": ordered}
    return (ordered, *args[1:]), kwargs
