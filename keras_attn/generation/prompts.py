"""Prompts for generation: parsed, checked and laid out in one buffer."""

import functools
from typing import NamedTuple

import keras
import numpy as np

# Prompts are padded to a bucket so that one compiled loop serves many lengths.
PROMPT_BUCKETS = (8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096)


class PreparedPrompts(NamedTuple):
    """Checked prompts, as the decoding loop takes them.

    Attributes:
        buffer: int32 numpy `(batch, bucket + max_new_tokens)`, each prompt
            followed by the pad id.
        lengths: int32 numpy `(batch,)`, each prompt's length.
        bucket: the padded prompt length (see `prompt_bucket`).
        condition: float32 numpy `(batch, width)`, the `condition` rows of
            a model with conditional LayerNorms, else None.
        source: an encoder-decoder's sources, int32 numpy `(batch,
            source_bucket)` padded with the pad id (the prompts are then its
            decoder's start tokens), else None.
        source_mask: int32 numpy of the sources' shape, 1 for real tokens.
    """

    buffer: object
    lengths: object
    bucket: int
    condition: object
    source: object = None
    source_mask: object = None


def prepare_prompts(forward, prompts, max_new_tokens, end_token_id=None, min_new_tokens=0,
                    start_token_id=None):
    """`prompts` (see `Generator.generate`) checked against the model of
    `forward` (a `CachedForward`) and laid out as `PreparedPrompts`.

    Raises:
        ValueError: an empty prompt, a prompt plus `max_new_tokens` longer
            than the position table, an id outside the vocabulary or not an
            integer (7.6; 7.0 is 7), `end_token_id` or `start_token_id`
            outside the vocabulary, `max_new_tokens < 1`, `min_new_tokens`
            outside `[0, max_new_tokens]`, a left-padded `padding_mask`, a
            missing, unexpected or malformed `condition`.
    """
    model = forward.model
    token_ids, lengths = parse_prompts(prompts)
    condition = prompt_condition(forward, prompts, len(lengths))
    check_settings(forward, lengths, max_new_tokens, end_token_id, min_new_tokens, start_token_id)
    name = "encoder_token_ids" if forward.seq2seq else "token_ids"
    model.input_contract.check_values({name: _real_tokens(token_ids, lengths)})
    if forward.seq2seq:
        return _with_start_tokens(forward, token_ids, lengths, max_new_tokens)
    batch, longest = len(lengths), int(lengths.max())
    bucket = prompt_bucket(longest, forward.max_length, max_new_tokens)
    buffer = np.full((batch, bucket + max_new_tokens), forward.pad_token_id, "int32")
    for row, length in enumerate(lengths):
        buffer[row, :length] = token_ids[row][:length]
    return PreparedPrompts(buffer, lengths.astype("int32"), bucket, condition)


def _real_tokens(rows, lengths):
    """The prompts' real tokens in one `(batch, longest)` array of their own
    dtype (floats stay floats, so that the input contract refuses 7.6
    instead of reading 7), 0 after each prompt: the contract's messages
    then give a token's position as (prompt, index)."""
    arrays = [np.asarray(row[:length]) for row, length in zip(rows, lengths)]
    dtype = functools.reduce(np.promote_types, (array.dtype for array in arrays))
    ids = np.zeros((len(arrays), int(lengths.max())), dtype)
    for row, array in enumerate(arrays):
        ids[row, : len(array)] = array
    return ids


def _with_start_tokens(forward, sources, lengths, max_new_tokens):
    """An encoder-decoder's prompts: the sources, padded to a bucket, and
    for the decoder its start token, one per row."""
    batch = len(lengths)
    bucket = prompt_bucket(int(lengths.max()), None, max_new_tokens)
    source = np.full((batch, bucket), forward.pad_token_id, "int32")
    for row, length in enumerate(lengths):
        source[row, :length] = sources[row][:length]
    source_mask = (np.arange(bucket)[None] < lengths[:, None]).astype("int32")
    buffer = np.full((batch, 1 + max_new_tokens), forward.pad_token_id, "int32")
    buffer[:, 0] = forward.start_token_id
    return PreparedPrompts(
        buffer, np.ones((batch,), "int32"), 1, None, source, source_mask
    )


def parse_prompts(prompts):
    """`(rows, lengths)`: each prompt's ids as a list, and their lengths."""
    if isinstance(prompts, dict):
        unknown = sorted(set(prompts) - {"token_ids", "padding_mask", "condition"})
        if unknown:
            raise ValueError(
                f"Prompt dicts take 'token_ids', 'padding_mask' and (for conditional "
                f"LayerNorms) 'condition'; received the unknown keys {unknown}."
            )
        ids = np.asarray(keras.ops.convert_to_numpy(prompts["token_ids"]))
        if "padding_mask" in prompts:
            mask = np.asarray(keras.ops.convert_to_numpy(prompts["padding_mask"])).astype(bool)
            lengths = mask.sum(axis=1)
            right_padded = mask == (np.arange(mask.shape[1])[None] < lengths[:, None])
            if not right_padded.all():
                row = int(np.argmin(right_padded.all(axis=1)))
                raise ValueError(
                    f"Prompt {row}'s `padding_mask` is not right-padded (real tokens "
                    "first, then padding); generation continues each prompt after its "
                    "last real token, so pad prompts on the right."
                )
        else:
            lengths = np.full((ids.shape[0],), ids.shape[1])
        return [list(row) for row in ids], lengths
    if hasattr(prompts, "shape") or (
        isinstance(prompts, (list, tuple)) and prompts and np.isscalar(prompts[0])
    ):
        array = np.asarray(
            keras.ops.convert_to_numpy(prompts) if hasattr(prompts, "shape") else prompts
        )
        if array.ndim == 1:
            array = array[None]
        return [list(row) for row in array], np.full((array.shape[0],), array.shape[1])
    rows = [list(np.asarray(p).reshape(-1)) for p in prompts]
    return rows, np.array([len(r) for r in rows])


def prompt_condition(forward, prompts, batch):
    """The checked `condition` of dict prompts, float32 `(batch, width)`,
    or None for a model without conditional LayerNorms."""
    model = forward.model
    given = isinstance(prompts, dict) and "condition" in prompts
    if not forward.conditional:
        if given:
            raise ValueError(
                f"{model.name} takes no `condition` (it has no conditional "
                "LayerNorms); drop the key."
            )
        return None
    if not given:
        raise ValueError(
            f"{model.name} was built with conditional_layer_norm=...: give the "
            'prompts as a dict with "token_ids" and "condition" (one row per prompt).'
        )
    condition = np.asarray(keras.ops.convert_to_numpy(prompts["condition"]), "float32")
    width = model.input_contract.vectors["condition"]
    if condition.shape != (batch, width):
        raise ValueError(
            f"The prompts' `condition` must be (batch, width) = ({batch}, {width}), "
            f"one row per prompt; received shape {condition.shape}."
        )
    model.input_contract.check_values({"condition": condition})
    return condition


def check_settings(forward, lengths, max_new_tokens, end_token_id, min_new_tokens,
                   start_token_id):
    """Raises a ValueError for settings the loop cannot honour."""
    if len(lengths) == 0:
        raise ValueError("`prompts` is empty; give at least one prompt.")
    if not isinstance(max_new_tokens, (int, np.integer)) or max_new_tokens < 1:
        raise ValueError(
            f"`max_new_tokens` must be a positive integer; received {max_new_tokens!r}."
        )
    if not 0 <= min_new_tokens <= max_new_tokens:
        raise ValueError(
            f"`min_new_tokens` must be in [0, max_new_tokens={max_new_tokens}]; "
            f"received {min_new_tokens!r}."
        )
    if (lengths < 1).any():
        row = int(np.argmin(lengths))
        raise ValueError(
            f"Prompt {row} is empty; every prompt needs at least one token (a start "
            "token such as [CLS])."
        )
    for name, token in (("end_token_id", end_token_id), ("start_token_id", start_token_id)):
        if token is not None and not 0 <= token < forward.vocab_size:
            raise ValueError(
                f"`{name}={token}` is outside the vocabulary "
                f"(vocab_size={forward.vocab_size})."
            )
    if forward.max_length is not None:
        longest = int(lengths.max())
        if longest + max_new_tokens > forward.max_length:
            raise ValueError(
                f"The longest prompt ({longest} tokens) plus max_new_tokens="
                f"{max_new_tokens} exceeds the {forward.max_length} positions of the "
                "model's position table; shorten the prompt or ask for fewer tokens."
            )


def prompt_bucket(longest, max_length, max_new_tokens):
    """The padded prompt length: the smallest bucket holding `longest`,
    within the position table (`max_length`, None for no table)."""
    bucket = next((b for b in PROMPT_BUCKETS if b >= longest), longest)
    if max_length is not None:
        bucket = min(bucket, max_length - max_new_tokens)
    return max(bucket, longest)


def new_tokens(tokens, lengths, max_new_tokens):
    """The `max_new_tokens` tokens after each row's prompt."""
    return np.stack(
        [row[length : length + max_new_tokens] for row, length in zip(tokens, lengths)]
    )
