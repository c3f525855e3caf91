"""Loading any supported checkpoint into a built model: the format decides
the name table."""

import os

from keras_attn.checkpoints import families
from keras_attn.checkpoints.keras_weights import load_weights_file
from keras_attn.checkpoints.porting import compound_token_groups
from keras_attn.checkpoints.porting import port_weights
from keras_attn.checkpoints.readers import CheckpointError
from keras_attn.checkpoints.readers import open_checkpoint


def load_checkpoint(model, checkpoint, keep_tokens=None, skip_missing=None,
                    compound_tokens=None):
    """Loads a checkpoint of any supported format into a built model (see
    `build_transformer_model` for the formats).

    All variables or none: every name and shape is checked before the first
    assignment, and a failure at any point leaves every variable exactly as
    it was. Checkpoint weights the model does not use are listed in an
    `UnusedWeightsWarning` (optimizer slots, tied duplicates, buffers and the
    heads the model was built without are not); in a `.weights.h5` they are
    an error, as Keras matches its arrays by layer class and order (see
    `keras_weights.load_weights_file`).

    `skip_missing` is the one exception, an explicit opt-in: a list of
    patterns (`fnmatch` style, e.g. `["MLM-*"]` or `["MLM-Dense",
    "MLM-Norm", "MLM-Bias"]`) naming model weights, by layer name or by
    variable path, that may stay at their initial values when the
    checkpoint lacks them, as when an encoder-only checkpoint (most Hugging
    Face BERTs, sentence encoders) is loaded into an `"mlm"`, `"lm"` or
    `"unilm"` model or one `with_pool`/`with_nsp`. Those left out are listed
    in a `SkippedWeightsWarning`; a pattern that matches no weight of the
    model is an error.

    `keep_tokens` (a list of vocabulary ids) keeps those entries of the
    token embedding, the masked-LM bias and an untied decoder, in that
    order; `compound_tokens` (a list of groups of ids, counted after
    `keep_tokens`) then appends one entry per group to each of them, the
    mean of the group's entries (bert4keras's `compound_tokens`, e.g. a
    cased token initialised from its uncased form). The model must have
    been built with the vocabulary these give, as `build_transformer_model`
    builds it when given the same arguments.

    Example:

    ```python
    model = keras_attn.build_transformer_model(config, vocab_size=vocab_size + 2)
    keras_attn.load_checkpoint(model, checkpoint, compound_tokens=[[5], [7, 9]])
    ```

    Raises:
        CheckpointError: a name missing, a shape that disagrees, a file that
            cannot be read, a `keep_tokens` or `compound_tokens` id outside
            the checkpoint's vocabulary; nothing was loaded.
        FileNotFoundError: nothing readable at `checkpoint`.
        ValueError: a `skip_missing` pattern that matches no weight; a
            `compound_tokens` group that is empty or holds a non-integer.
    """
    path = os.fspath(checkpoint)
    if path.endswith(".weights.h5"):
        for argument, value in (
            ("keep_tokens", keep_tokens),
            ("skip_missing", skip_missing),
            ("compound_tokens", compound_tokens),
        ):
            if value is not None:
                raise ValueError(
                    f"{argument} applies to pretrained checkpoints, not to {path!r}, "
                    "which already holds this model's own weights."
                )
        load_weights_file(model, path)
        return model
    if compound_tokens is not None:
        compound_tokens = compound_token_groups(compound_tokens)
    reader = open_checkpoint(path)
    port_weights(
        model,
        reader,
        name_table(model, reader),
        keep_tokens=keep_tokens,
        skip_missing=skip_missing,
        compound_tokens=compound_tokens,
    )
    return model


def name_table(model, reader):
    """The name table that maps `reader`'s checkpoint onto `model`: the
    `name_tables` of the model's checkpoint family (its template's, see
    `keras_attn.checkpoints.families`) for the reader's format (and, for
    ELECTRA's Google checkpoints, the model's application).

    Raises:
        CheckpointError: a format the family is never stored in.
    """
    template = getattr(model, "template", None)
    family = "bert" if template is None else template.checkpoint_family
    declared = families.get(family)
    tables = declared.name_tables if declared is not None else {}
    if reader.format not in tables:
        raise CheckpointError(
            f"{reader.path!r} is a {reader.format} checkpoint; {family} models are read "
            f"from {sorted(tables)} checkpoints."
        )
    table = tables[reader.format]
    if isinstance(table, dict):
        return table[template.application]
    return table
