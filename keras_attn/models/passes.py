"""The two kinds of pass a template's hooks and blocks run in: `FullPass`
(its value `FULL_PASS`) and `DecodeStep`."""

import functools
import inspect
import warnings

from keras import ops

from keras_attn.layers import masking
from keras_attn.torch_runtime.direct_call import direct_call
from keras_attn.torch_runtime.direct_call import keras_call


class FullPass:
    """The full pass over whole sequences, one of the two kinds of pass
    (with `DecodeStep`) that a template's hooks (`embed`, `finish_blocks`,
    `language_model_head`) and `TransformerBlock`s are given as `step=`.
    They ask it what differs between the passes instead of branching on
    "decoding":

    - `FULL_PASS` (`keras_attn.models.FULL_PASS`, this class's value): whole
      sequences, on symbolic tensors when the template records the model's
      graph. Layers run through Keras' `__call__`, dropout runs, padding
      comes from the ids and rides on the hidden states as their Keras
      mask, a position table is read at each token's position.
    - `DecodeStep(cache_step)`: a chunk of new tokens against key/value
      caches (`keras_attn.generation.CachedForward`). Layers run by their
      `call` (`keras_attn.torch_runtime.direct_call`), no dropout, padding
      is the caches' business, a position table is read at the
      `CacheStep`'s positions.

    A hook overridden by a variant takes `step=FULL_PASS` and passes it on;
    one written for the former `cache_step=` is adapted with a
    DeprecationWarning when its class is made (`adapt_step_hooks`).

    Example, a variant's head written once for both passes:

    ```python
    from keras_attn.models import FULL_PASS

    class DoubledLogits(keras_attn.Transformer):
        def language_model_head(self, hidden, condition=None, step=FULL_PASS):
            return super().language_model_head(hidden, condition, step) * 2.0
    ```

    Attributes:
        decoding: False.
        cache_step: None (a `DecodeStep`'s `CacheStep`).
    """

    decoding = False
    cache_step = None

    def run(self, layer, *args, **kwargs):
        """`layer(*args, **kwargs)` through Keras' `__call__`."""
        return keras_call(layer, *args, **kwargs)

    def dropout(self, layer, hidden):
        """`layer(hidden)`: the dropout layer runs."""
        return layer(hidden)

    def real_tokens(self, token_ids, pad_token_id, padding_mask=None):
        """The boolean mask of real tokens: `padding_mask` when given, else
        the ids other than `pad_token_id` (see `masking.real_tokens`)."""
        return masking.real_tokens(token_ids, pad_token_id, padding_mask)

    def positions(self, layer, token_ids, padding_mask):
        """A position table `layer` read at each token's position (which
        may count real tokens only, RoBERTa's)."""
        return layer(token_ids, padding_mask=padding_mask)

    def mask(self, layer, hidden, padding_mask):
        """`hidden` carrying `padding_mask` as its Keras mask (`layer`, a
        `keras.layers.Identity`-like layer taking `mask=`)."""
        return layer(hidden, mask=padding_mask)

    def attend(self, layer, hidden, cache=None, **arguments):
        """`(output, cache)` of a self-attention `layer` on `hidden`: every
        query row computed (padding enters through the attention mask), no
        cache (`cache` must be None)."""
        if cache is not None:
            raise ValueError(
                f"{layer.name}: a key/value `cache` is read by a decoding step only; the "
                "full pass (step=FULL_PASS) takes none. Give step=DecodeStep(cache_step)."
            )
        return layer(hidden, query_mask=every_query(hidden), **arguments), None

    def block_output(self, hidden, cache):
        """What a block returns: `hidden`."""
        return hidden

    def __repr__(self):
        return "FULL_PASS"


FULL_PASS = FullPass()


class DecodeStep(FullPass):
    """A decoding step over a chunk of new tokens (see `FullPass`).

    Args:
        cache_step: the step's `keras_attn.layers.CacheStep` (slots and
            positions of the new tokens), shared by every layer.
        packing: optional `keras_attn.layers.packed.PackedRows`: the step
            packs sequences in one row as the serving engine lays them out,
            and each self-attention gets it (`packing=`) to attend on the
            blocks of slots its queries see.
    """

    decoding = True

    def __init__(self, cache_step, packing=None):
        if cache_step is None:
            raise ValueError("DecodeStep needs the step's CacheStep; received None.")
        self.cache_step = cache_step
        self.packing = packing

    def run(self, layer, *args, **kwargs):
        """`layer.call(*args, **kwargs)` where that is exact (`direct_call`)."""
        return direct_call(layer, *args, **kwargs)

    def dropout(self, layer, hidden):
        """`hidden`: decoding runs no dropout."""
        return hidden

    def real_tokens(self, token_ids, pad_token_id, padding_mask=None):
        """`padding_mask` as given: the caches hold which slots are real."""
        return padding_mask

    def positions(self, layer, token_ids, padding_mask):
        """The table `layer` read at the step's positions
        (`CacheStep.embedding_positions`)."""
        return self.run(layer, token_ids, positions=self.cache_step.embedding_positions)

    def mask(self, layer, hidden, padding_mask):
        """`hidden`: a step carries no Keras mask."""
        return hidden

    def attend(self, layer, hidden, cache=None, **arguments):
        """`(output, updated cache)` of `layer` on the new tokens `hidden`,
        writing them to `cache` (required)."""
        if cache is None:
            raise ValueError(
                f"{layer.name}: a decoding step attends over a key/value `cache`; "
                "received none."
            )
        if self.packing is not None:
            arguments["packing"] = self.packing
        return self.run(layer, hidden, cache=cache, cache_step=self.cache_step, **arguments)

    def block_output(self, hidden, cache):
        """What a block returns: `(hidden, cache)`."""
        return hidden, cache

    def __repr__(self):
        return f"DecodeStep({self.cache_step!r})"


def step_of(step, cache_step):
    """The pass of a hook given `step` and the deprecated `cache_step`
    (a `CacheStep`, which now rides on `DecodeStep`)."""
    if cache_step is None:
        return step
    if step is not FULL_PASS:
        raise ValueError(
            "Give `step` or the deprecated `cache_step`, not both; received "
            f"step={step!r}."
        )
    warnings.warn(
        "`cache_step=` is deprecated; pass step=DecodeStep(cache_step) "
        "(keras_attn.models.passes).",
        DeprecationWarning, stacklevel=3,
    )
    return DecodeStep(cache_step)


def every_query(hidden):
    """An all-true `query_mask` for `hidden` `(batch, length, width)`, so
    Keras does not mask padded query rows from the hidden states' mask: the
    blocks take padding through `attention_mask` and compute padded rows as
    the reference implementations do."""
    return ops.ones_like(ops.take(hidden, 0, axis=-1), dtype="bool")


# The hooks a decoding step calls with `step=`, and the argument that said
# "decoding" to each before `step=` (then `cache_step=`) said it to all.
STEP_HOOKS = {
    "embed": "positions",
    "finish_blocks": "decoding",
    "language_model_head": "decoding",
}


def _takes(hook, name):
    parameters = inspect.signature(hook).parameters
    return name in parameters or any(
        p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values()
    )


def _from_cache_step(hook):
    """`hook`, written for `cache_step=`, called with `step=`."""

    @functools.wraps(hook)
    def adapted(self, *args, step=FULL_PASS, **kwargs):
        return hook(self, *args, cache_step=step.cache_step, **kwargs)

    # Its signature is its own (`step=`), not the hook's it wraps.
    del adapted.__wrapped__
    return adapted


def adapt_step_hooks(cls):
    """Makes the step hooks `cls` defines (a `Transformer` subclass) take
    `step=`, when class `cls` is created: one written for the deprecated
    `cache_step=` is wrapped, with a DeprecationWarning naming the new
    spelling. Returns the hooks that still take neither (written for the
    older `positions=`/`decoding=`, or for the full pass only), as
    `{name: why}`: such a variant builds and runs its full pass, and
    cached decoding refuses it by name."""
    for name in STEP_HOOKS:
        hook = cls.__dict__.get(name)
        if hook is None or _takes(hook, "step") or "cache_step" not in inspect.signature(hook).parameters:
            continue
        warnings.warn(
            f"{cls.__name__}.{name} takes `cache_step=`, which is deprecated: take "
            "`step=FULL_PASS` (keras_attn.models.passes; a decoding step gives a "
            "`DecodeStep`, whose `cache_step` is the former argument) and run layers "
            "by `step.run`.",
            DeprecationWarning, stacklevel=3,
        )
        setattr(cls, name, _from_cache_step(hook))
    missing = {}
    for name, legacy in STEP_HOOKS.items():
        hook = getattr(cls, name)
        if not _takes(hook, "step"):
            parameters = inspect.signature(hook).parameters
            missing[name] = f" (it takes `{legacy}=`, which no step gives now)" if legacy in parameters else ""
    return missing
