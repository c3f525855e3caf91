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

    Inputs are a dict taken by name (a key the model does not take is an
    error naming it and the expected keys; Keras itself only warns and feeds
    the tensors in sorted order), or bert4keras's list `[token_ids,
    segment_ids]` (`[token_ids, segment_ids, padding_mask]` with
    `padding_mask_input`; `[token_ids]` for a model without token types),
    read in that fixed order and then checked as the dict is: a list of
    another length is an error naming the order. Dtypes, ranks and shapes
    are checked on every call, traced or eager; values (ids within the
    vocabulary, segment ids within the token types, lengths within the
    position table, integral floats) are checked wherever they are concrete:

    - in eager calls, `model(inputs)`;
    - in `fit`, `evaluate`, `predict` and the `*_on_batch` methods, on the
      whole of array data before the first step, on each element of a
      `tf.data.Dataset` (in the input pipeline) and on each batch of a
      generator or `keras.utils.PyDataset`, so no out-of-range id reaches a
      compiled step, where XLA's gather would clamp it silently and JAX
      would return NaN.

    Batches of a generator or `keras.utils.PyDataset` may hold Python lists
    (bert4keras's `[token_ids, segment_ids], labels`) on every backend: the
    inputs become a dict by name and lists in the targets tuples, which
    Keras' TensorFlow trainer (through `tf.data`) requires.

    `predict` on batches of different lengths (a `tf.data` `padded_batch`
    without `padded_shapes`) returns a `tf.RaggedTensor` on TensorFlow; on
    JAX and torch Keras cannot concatenate such outputs, and the error says
    to pad every batch to one length or to call `predict_on_batch` per batch.

    On torch, `compile(..., jit_compile=True)` compiles the Transformer
    blocks (`keras_attn.torch_runtime.compiled_blocks.CompiledBlocks`): each block
    structure is traced and compiled by `torch.compile` once, and shared by
    every block of that structure (BERT-base's 12 blocks compile as one, in
    seconds); the embeddings and heads run eagerly around them, as do
    `fit`'s, `evaluate`'s and `predict`'s steps, and `model(inputs)` too
    once compiled so. `KERAS_ATTN_COMPILE_BLOCKS=0` in the environment
    gives Keras' own `torch.compile` of each whole step back (one graph
    per input shape; its train step breaks at Keras' `loss.backward()`),
    which takes minutes for BERT-base. It is off by default, as Keras has
    it (see the Speed page, issues 22 and 30).

    Targets given as arrays to a model compiled with
    `keras_attn.TokenCrossEntropy` are checked against its label contract
    before the first step too (in a compiled step a bad label could only make
    the loss NaN).

    If anything raises inside `fit`, `evaluate` or `predict`, the model keeps
    its weights (on JAX, Keras detaches them while a compiled loop runs; they
    are re-attached, with the progress of the completed steps). On JAX,
    variables sharing one array (Keras' EMA leaves each weight and its
    average so, after `fit` and `SwapEMAWeights(swap_on_epoch=True)`'s last
    epoch) get their own copies before each loop, which would otherwise
    delete the shared array (`predict` then `save_weights` failed with
    "Array has been deleted").

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
        """The model's symbolic inputs by name, `{"token_ids": ...,
        "segment_ids": ...}`: `model.inputs` is a list in bert4keras's order,
        this is the same tensors as a dict (what the template's
        `apply_embeddings` and `block_arguments` take).

        Example:

        ```python
        token_ids = model.named_inputs["token_ids"]   # model.inputs[0]
        ```
        """
        return {tensor.name: tensor for tensor in self.inputs}

    @property
    def template(self):
        """The `keras_attn.Transformer` whose layers this model runs, or None
        for a model not built by `build_transformer_model` (or saved before
        keras_attn recorded it in `.keras` files)."""
        if self._template is None and self._template_record is not None:
            record = json.loads(self._template_record)
            self._template = template_from_record(record).bind(self)
        return self._template

    def generate(self, prompts, max_new_tokens, sampler="greedy", **kwargs):
        """Continues `prompts` token by token with a key/value cache.

        For `application="lm"` and `"unilm"` models; see
        `keras_attn.generation.Generator` for the arguments, the samplers
        and beam search. The first call compiles the decoding loop (on
        TensorFlow and JAX), later calls with the same shapes reuse it.

        Example:

        ```python
        model = keras_attn.build_transformer_model(config, application="lm")
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
        """A model from this model's inputs to `outputs`, checking its
        inputs as this one does.

        Use it for a head on top of a builder model; a plain
        `keras.Model(encoder.input, outputs)` takes inputs by Keras' rules,
        without these checks.

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

        The artefact takes the model's inputs by name (`token_ids`,
        `segment_ids`, ...), each `(batch, length)` with both dimensions
        free. On JAX (`tf_saved_model`, through `jax2tf`), every input is
        given the one symbolic shape `(batch, length)`, which the inputs
        share (a `condition` input is `(batch, width)`); Keras' default gives each input its own length, which the
        model cannot add together. Pass `jax2tf_kwargs={"polymorphic_shapes":
        ...}` to choose otherwise. The input checks run while tracing
        (names, dtypes, ranks); values are not checked in the artefact.

        Where Keras supports what (tested in tests/export): `tf_saved_model`
        on TensorFlow and JAX (torch needs `torch_xla`); `onnx` on torch with
        an `input_signature` of fixed shapes (Keras' torch exporter fails on
        `LayerNormalization` with free dimensions; needs the `[export]`
        extra). Keras converts TensorFlow models to ONNX with `tf2onnx`,
        whose 1.17 release cannot convert these models (GELU's `Erfc`,
        dynamic reshapes), and JAX models with `jax2onnx` (not tested).

        Example:

        ```python
        model.export("exported", format="tf_saved_model")
        reloaded = tf.saved_model.load("exported")
        outputs = reloaded.serve({"token_ids": ids, "segment_ids": segments})
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
        """`Functional.call`; on torch, the path `TorchRunner` picks (the
        same numbers): eagerly each layer computed by its `call`
        (`DirectGraph`), its blocks compiled under `jit_compile=True`, and
        on a GPU an inference pass replayed as a CUDA graph. Ask
        `keras_attn.explain(model)` which path ran and why."""
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
        """Which path `model(x)`, `predict`, `fit` and `generate` take on
        this backend and device, and why (a
        `keras_attn.torch_runtime.plan.ExecutionPlan`; `print` it).

        Example:

        ```python
        print(model.execution_plan())
        ```
        """
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
        """Keras' `load_weights`, all or nothing for a `.weights.h5` file:
        a file whose layers or variables are not this model's (arrays the
        model lacks or has no place for, shapes that differ) is a
        `CheckpointError` (a ValueError) listing them with their layer
        names, raised before anything is assigned (see
        `keras_attn.checkpoints.keras_weights.load_weights_file`). Keras
        itself loads a 2-layer file into a 1-layer model, dropping layer 1
        and giving later layers of the same class the wrong arrays.
        `skip_mismatch=True` and other formats are Keras' loading as is."""
        if skip_mismatch or kwargs or not os.fspath(filepath).endswith(".weights.h5"):
            return super().load_weights(filepath, skip_mismatch=skip_mismatch, **kwargs)
        from keras_attn.checkpoints.keras_weights import load_weights_file

        load_weights_file(self, os.fspath(filepath))

    # Checks -----------------------------------------------------------------

    def _checked(self, inputs):
        """The model's own inputs from `inputs` (see `InputContract.check`)."""
        return self.input_contract.check(inputs)

    def _batch(self, data):
        """`data` (checked inputs, targets) for a `*_on_batch` step: on torch
        with `jit_compile=True`, numpy arrays become torch tensors first.

        Keras' torch `fit` and `predict` hand their compiled step tensors,
        but its `*_on_batch` methods hand it the arrays as given, and dynamo
        cannot trace numpy's `dtype` (in Keras' `convert_to_tensor` and in
        the input checks): each array broke the graph, and the pieces
        between the breaks, compiled once per layer, ran into dynamo's
        recompile limit. Elsewhere `data` is returned as it is.
        """
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
        """On JAX, a loop that raises gives back the arrays it detached from
        the variables, after writing back the steps it completed (see
        `keras_internals.JaxLoopState`, whose state never lets a donating
        step delete an array that another variable holds)."""
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
    name) and every list in its targets and sample weights a tuple: Keras'
    TensorFlow trainer reads a `PyDataset` or generator through `tf.data`,
    which refuses Python lists, while JAX and torch take them; a tuple
    reads as the list did on all three."""
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
    names, dtypes and shapes once, on its element spec; the length and the
    values on every element, by assertions made from the rules
    `InputContract.check` applies (`keras_attn.models.input_rules`),
    computed with TensorFlow ops, since the values exist only inside the
    pipeline. An assertion's message is the one `check` raises."""
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
    inputs replaced by the list in the contract's positional order.

    Keras orders a dict of inputs by sorted name, so `model.inputs` would be
    `[segment_ids, token_ids]`, and `keras.Model(model.inputs, outputs)`, the
    everyday bert4keras wrapper, would read bert4keras's `[token_ids,
    segment_ids]` backwards. Built over a list in the order of
    `InputContract.positional_names`, `model.inputs` (and `model.input`) is
    that order, and calls by name still work: Keras maps a dict onto a list
    of inputs by their names. Models saved with a dict of inputs load the
    same way.
    """
    inputs = kwargs["inputs"] if "inputs" in kwargs else (args[0] if args else None)
    if not isinstance(inputs, dict):
        return args, kwargs
    order = [name for name in contract.positional_names if name in inputs]
    ordered = [inputs[name] for name in order]
    ordered += [tensor for name, tensor in inputs.items() if name not in order]
    if "inputs" in kwargs:
        return args, {**kwargs, "inputs": ordered}
    return (ordered, *args[1:]), kwargs
