"""Prompts for generation: parsed, checked and laid out in one buffer."""

import functools
import os
import weakref
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
        target_starts: int32 numpy `(batch,)`, where each prompt's segment 1
            begins (see `prompt_target_starts`): its length when the whole
            prompt is segment 0; None for an encoder-decoder.
    """

    buffer: object
    lengths: object
    bucket: int
    condition: object
    source: object = None
    source_mask: object = None
    target_starts: object = None


def prepare_prompts(forward, prompts, max_new_tokens, end_token_id=None, min_new_tokens=0,
                    start_token_id=None):
    """`prompts` (see `Generator.generate`) checked against the model of
    `forward` (a `CachedForward`) and laid out as `PreparedPrompts`.

    Raises:
        ValueError: for the cases `Generator.generate` lists (a float id such
            as 7.6 is refused, 7.0 is 7), a left-padded `padding_mask`, a
            missing, unexpected or malformed `condition`.
    """
    model = forward.model
    token_ids, lengths = parse_prompts(prompts)
    condition = prompt_condition(forward, prompts, len(lengths))
    target_starts = prompt_target_starts(forward, prompts, lengths)
    check_settings(forward, lengths, max_new_tokens, end_token_id, min_new_tokens, start_token_id)
    name = "encoder_token_ids" if forward.seq2seq else "token_ids"
    model.input_contract.check_values({name: _real_tokens(token_ids, lengths)})
    if forward.seq2seq:
        return _with_start_tokens(forward, token_ids, lengths, max_new_tokens)
    batch, longest = len(lengths), int(lengths.max())
    bucket = prompt_bucket(longest, forward.max_length, max_new_tokens, forward.length_dependent)
    buffer = np.full((batch, bucket + max_new_tokens), forward.pad_token_id, "int32")
    for row, length in enumerate(lengths):
        buffer[row, :length] = token_ids[row][:length]
    return PreparedPrompts(
        buffer, lengths.astype("int32"), bucket, condition, target_starts=target_starts
    )


def _real_tokens(rows, lengths):
    """The prompts' real tokens in one `(batch, longest)` array of their own
    dtype (so the contract refuses 7.6), 0 after each prompt."""
    arrays = [np.asarray(row[:length]) for row, length in zip(rows, lengths)]
    dtype = functools.reduce(np.promote_types, (array.dtype for array in arrays))
    ids = np.zeros((len(arrays), int(lengths.max())), dtype)
    for row, array in enumerate(arrays):
        ids[row, : len(array)] = array
    return ids


def _with_start_tokens(forward, sources, lengths, max_new_tokens):
    """An encoder-decoder's prompts: the sources padded to a bucket, their real
    tokens, and one decoder start token per row."""
    batch = len(lengths)
    bucket = prompt_bucket(int(lengths.max()), None, max_new_tokens, forward.length_dependent)
    source = np.full((batch, bucket), forward.pad_token_id, "int32")
    for row, length in enumerate(lengths):
        source[row, :length] = sources[row][:length]
    source_mask = np.arange(bucket)[None] < lengths[:, None]
    plan = forward.plan
    if not plan.padding_mask_input and plan.pad_token_id is not None:
        # The full pass reads every pad id of a source as padding (a source
        # of pad ids alone has no real token): so does generation.
        source_mask &= source != plan.pad_token_id
    source_mask = source_mask.astype("int32")
    buffer = np.full((batch, 1 + max_new_tokens), forward.pad_token_id, "int32")
    buffer[:, 0] = forward.start_token_id
    return PreparedPrompts(
        buffer, np.ones((batch,), "int32"), 1, None, source, source_mask
    )


def parse_prompts(prompts):
    """`(rows, lengths)`: each prompt's ids as a list, and their lengths.

    Raises:
        TypeError: text instead of token ids, or prompts of another type.
        ValueError: a prompt that is not a flat sequence of numbers (the
            message names the prompt row and the element), ragged rows
            where one array is expected, a `padding_mask` whose shape is
            not `token_ids`'s, or a `padding_mask` that is not right-padded.
    """
    if isinstance(prompts, (str, bytes)):
        raise TypeError(
            f"`prompts` must be token ids, not text: received the {type(prompts).__name__} "
            f"{_shown(prompts)}. Encode it first, e.g. "
            "`model.generate([tokenizer.encode(text)[0]], max_new_tokens)`."
        )
    if isinstance(prompts, dict):
        return _parse_prompt_dict(prompts)
    if hasattr(prompts, "shape"):
        array = _number_array(prompts, "`prompts`")
        if array.ndim == 1:
            array = array[None]
        if array.ndim != 2:
            raise ValueError(
                f"`prompts` as an array must be (batch, length) or (length,); received "
                f"shape {array.shape}."
            )
        return [list(row) for row in array], np.full((array.shape[0],), array.shape[1])
    if not isinstance(prompts, (list, tuple)):
        raise TypeError(
            "`prompts` must be a list of token-id sequences, one sequence, a 2D int array "
            f"or a dict with 'token_ids'; received {type(prompts).__name__}."
        )
    numbers = [_is_number(token) for token in prompts]
    if prompts and all(numbers):
        prompts = [prompts]  # one prompt
    elif any(numbers):
        other = numbers.index(False)
        raise ValueError(
            f"`prompts` mixes token ids and sequences: element {numbers.index(True)} is "
            f"{_shown(prompts[numbers.index(True)])}, element {other} is "
            f"{_shown(prompts[other])}. Give one prompt as a flat list of ints, or several "
            "as a list of such lists."
        )
    rows = [_prompt_row(prompt, row) for row, prompt in enumerate(prompts)]
    return rows, np.array([len(r) for r in rows], "int64")


def _parse_prompt_dict(prompts):
    unknown = sorted(set(prompts) - {"token_ids", "padding_mask", "segment_ids", "condition"})
    if unknown:
        raise ValueError(
            f"Prompt dicts take 'token_ids', 'padding_mask', 'segment_ids' and (for "
            f"conditional LayerNorms) 'condition'; received the unknown keys {unknown}."
        )
    if "token_ids" not in prompts:
        raise ValueError("Prompt dicts need 'token_ids' (batch, length); the dict has none.")
    ids = _number_array(prompts["token_ids"], "The prompts' 'token_ids'")
    if ids.ndim != 2:
        raise ValueError(
            f"The prompts' 'token_ids' must be (batch, length), one right-padded row per "
            f"prompt; received shape {ids.shape}."
        )
    if "padding_mask" not in prompts:
        return [list(row) for row in ids], np.full((ids.shape[0],), ids.shape[1])
    mask = _number_array(prompts["padding_mask"], "The prompts' 'padding_mask'", allow_bool=True)
    mask = mask.astype(bool)
    if mask.shape != ids.shape:
        raise ValueError(
            f"The prompts' 'padding_mask' has shape {mask.shape}, but 'token_ids' has shape "
            f"{ids.shape}; the mask must have token_ids' shape (1 for real tokens, 0 for "
            "padding)."
        )
    lengths = mask.sum(axis=1)
    right_padded = mask == (np.arange(mask.shape[1])[None] < lengths[:, None])
    if not right_padded.all():
        row = int(np.argmin(right_padded.all(axis=1)))
        raise ValueError(
            f"Prompt {row}'s `padding_mask` is not right-padded (real tokens "
            "first, then padding); generation continues each prompt after its "
            "last real token, so pad prompts on the right."
        )
    return [list(row) for row in ids], lengths


def _prompt_row(prompt, row):
    """Prompt `row` as a list of numbers (checked as ids later), or a
    ValueError naming the row and what in it is not a token id."""
    if isinstance(prompt, (str, bytes)):
        raise TypeError(
            f"Prompt {row} is the {type(prompt).__name__} {_shown(prompt)}; prompts are "
            "token ids: encode the text first (`tokenizer.encode(text)[0]`)."
        )
    if not hasattr(prompt, "shape"):
        if not isinstance(prompt, (list, tuple)):
            raise ValueError(
                f"Prompt {row} is {_shown(prompt)} ({type(prompt).__name__}); each prompt "
                "is a sequence of token ids."
            )
        for index, token in enumerate(prompt):
            if not _is_number(token):
                raise ValueError(
                    f"Prompt {row}'s element {index} is {_shown(token)} "
                    f"({type(token).__name__}); each prompt is a flat sequence of integer "
                    "token ids (a list of lists per prompt is one level too deep)."
                )
    array = _number_array(prompt, f"Prompt {row}")
    if array.ndim != 1 and sum(size > 1 for size in array.shape) > 1:
        raise ValueError(
            f"Prompt {row} has shape {array.shape}; each prompt is one sequence of token "
            "ids, shape (length,)."
        )
    return list(array.reshape(-1))


def _number_array(value, what, allow_bool=False):
    """`value` as a numpy array of numbers (ints, or floats that the id
    checks then require to be integral); errors start with `what`."""
    if isinstance(value, np.ndarray):
        array = value
    elif hasattr(value, "shape"):
        array = np.asarray(keras.ops.convert_to_numpy(value))
    else:
        try:
            array = np.asarray(value)
        except ValueError:
            raise ValueError(
                f"{what} is ragged (rows of different lengths or nesting): it must be one "
                "rectangular array. Give prompts of different lengths as a list of "
                "lists, or right-padded rows with a 'padding_mask'."
            ) from None
    if array.dtype == object:
        raise ValueError(
            f"{what} is a numpy object array (dtype=object, shape {array.shape}), as "
            "numpy builds from ragged rows; give a list of int sequences (e.g. "
            "`prompts.tolist()`), or right-padded int rows with a 'padding_mask'."
        )
    if array.dtype.kind not in ("iufb" if allow_bool else "iuf"):
        raise ValueError(f"{what} must hold integer token ids; received dtype {array.dtype}.")
    return array


def _is_number(value):
    return (
        isinstance(value, (int, float, np.integer, np.floating))
        and not isinstance(value, (bool, np.bool_))
    ) or (hasattr(value, "shape") and tuple(value.shape) == ())


def _shown(value, limit=40):
    shown = repr(value)
    return shown if len(shown) <= limit else shown[: limit - 3] + "..."


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


def prompt_target_starts(forward, prompts, lengths):
    """Where each prompt's segment 1 begins, int32 `(batch,)`: its first
    segment-1 token, or its length when its `segment_ids` (a dict prompt's,
    `(batch, length)`) are all 0 or not given. See `target_start`.

    Raises:
        ValueError: `segment_ids` of another shape than `token_ids`, or a
            row that `target_start` refuses (the message names the row).
    """
    if not isinstance(prompts, dict) or "segment_ids" not in prompts:
        return np.asarray(lengths, "int32")
    segment_ids = _number_array(prompts["segment_ids"], "The prompts' 'segment_ids'")
    shape = np.shape(prompts["token_ids"])
    if segment_ids.shape != shape:
        raise ValueError(
            f"The prompts' 'segment_ids' has shape {segment_ids.shape}, but 'token_ids' has "
            f"shape {shape}; give one segment id per token id."
        )
    return np.array(
        [
            target_start(forward, segment_ids[row, :length], f"prompt {row}'s ")
            for row, length in enumerate(lengths)
        ],
        "int32",
    )


def target_start(forward, segment_ids, where="", owner=None):
    """The position of the first segment-1 id of one prompt's 1-D
    `segment_ids`, or its length when there is none. A `"unilm"` model takes
    0s for the source then 1s for a target prefix (e.g. `[0, 0, 0, 1, 1]`),
    which the generated tokens continue; other models take segment 0 only.

    Raises:
        ValueError: naming `owner`, `where` (e.g. "prompt 1's ") and
            `segment_ids`, for ids other than those.
    """
    segment_ids = np.asarray(segment_ids)
    nonzero = np.flatnonzero(segment_ids != 0)
    start = int(nonzero[0]) if len(nonzero) else len(segment_ids)
    prefix = "" if owner is None else f"{owner}: "
    shown = _shown(segment_ids.tolist(), limit=80)
    if forward.unilm:
        if not (segment_ids[start:] == 1).all():
            raise ValueError(
                f"{prefix}{where}`segment_ids` must be UniLM's layout: 0 for the source, then "
                "1 for a target prefix that the generated tokens continue (e.g. [0, 0, 0, 1, "
                f"1]); received {shown}."
            )
    elif len(nonzero):
        raise ValueError(
            f"{prefix}{where}`segment_ids` must be all 0 for {forward.model.name} "
            f"(application={forward.application!r}): only an application='unilm' model "
            f"continues a segment-1 prefix; received {shown}."
        )
    return start


def check_settings(forward, lengths, max_new_tokens, end_token_id, min_new_tokens,
                   start_token_id):
    """Raises a ValueError, before anything is allocated, for settings the loop
    cannot honour: `max_new_tokens` not an integer >= 1 (a bool is refused),
    `min_new_tokens` outside `[0, max_new_tokens]`, an empty prompt, an id
    outside the vocabulary, sequences longer than the position table, or
    than `check_decoding_size` allows."""
    if len(lengths) == 0:
        raise ValueError("`prompts` is empty; give at least one prompt.")
    if not _is_integer(max_new_tokens) or max_new_tokens < 1:
        raise ValueError(
            f"`max_new_tokens` must be a positive integer; received {max_new_tokens!r} "
            f"({type(max_new_tokens).__name__})."
        )
    if not _is_integer(min_new_tokens) or not 0 <= min_new_tokens <= max_new_tokens:
        raise ValueError(
            f"`min_new_tokens` must be an integer in [0, max_new_tokens={max_new_tokens}]; "
            f"received {min_new_tokens!r} ({type(min_new_tokens).__name__})."
        )
    if (lengths < 1).any():
        row = int(np.argmin(lengths))
        raise ValueError(
            f"Prompt {row} is empty; every prompt needs at least one token (a start "
            "token such as [CLS])."
        )
    for name, token in (("end_token_id", end_token_id), ("start_token_id", start_token_id)):
        check_token_id(name, token, forward.vocab_size)
    longest = int(lengths.max())
    if forward.max_length is not None and longest + max_new_tokens > forward.max_length:
        raise ValueError(
            f"The longest prompt ({longest} tokens) plus max_new_tokens="
            f"{max_new_tokens} exceeds the {forward.max_length} positions of the "
            "model's position table; shorten the prompt or ask for fewer tokens."
        )
    check_decoding_size(forward, len(lengths), longest, max_new_tokens)


# Decoding's positions, lengths and token buffer are int32.
MAX_POSITIONS = 2**31 - 1


def check_decoding_size(forward, batch, longest, max_new_tokens):
    """Raises a ValueError naming the sizes when `batch` rows of up to
    `longest` prompt tokens plus `max_new_tokens` exceed `MAX_POSITIONS`, or
    when their token buffer and cache (`forward.capacity` slots per row)
    would exceed the machine's physical memory."""
    length = (1 if forward.seq2seq else longest) + max_new_tokens
    what = (
        f"max_new_tokens={max_new_tokens} after "
        + ("the decoder's start token" if forward.seq2seq else f"the longest prompt ({longest} tokens)")
        + f" makes sequences of {length} positions"
    )
    made_for = "" if forward.max_length is not None else (
        f" ({forward.model.name} has no position table, so no length limit of its own; "
        f"its config gives max_position_embeddings={forward.plan.max_position}.)"
    )
    if length > MAX_POSITIONS:
        raise ValueError(
            f"generate: {what}, more than the {MAX_POSITIONS} that decoding's int32 "
            f"positions hold; ask for fewer tokens.{made_for}"
        )
    memory = _physical_memory()
    if memory is None:
        return
    per_slot = _bytes_per_slot(forward)
    capacity = forward.capacity(longest, length)
    needed = batch * (4 * length + per_slot * capacity)
    if needed > memory:
        raise ValueError(
            f"generate: {what}; decoding {batch} row(s) of them needs at least "
            f"{_gibibytes(needed)} (a token buffer of 4 bytes per position and a "
            f"key/value cache of {per_slot} bytes per position, {capacity} positions, per "
            f"row), more than this machine's {_gibibytes(memory)} of memory; ask for "
            f"fewer tokens or fewer prompts at once.{made_for}"
        )


# CachedForward -> the bytes of one row's slot of its decoding cache.
_SLOT_BYTES = weakref.WeakKeyDictionary()


def _bytes_per_slot(forward):
    """The bytes one slot of one row takes in `forward`'s decoding cache,
    measured once per `forward` on two tiny caches."""
    if forward not in _SLOT_BYTES:
        _SLOT_BYTES[forward] = (
            _cache_bytes(forward.empty_cache(1, 2)) - _cache_bytes(forward.empty_cache(1, 1))
        )
    return _SLOT_BYTES[forward]


def _cache_bytes(cache):
    return sum(
        int(np.prod(tensor.shape)) * np.dtype(keras.backend.standardize_dtype(tensor.dtype)).itemsize
        for tensor in keras.tree.flatten(cache)
    )


def _physical_memory():
    """The machine's physical memory in bytes, or None where the system
    does not say (Windows)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):
        return None


def _gibibytes(size):
    return f"{size / 2**40:.1f} TiB" if size >= 2**40 else f"{size / 2**30:.1f} GiB"


def _is_integer(value):
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def check_token_id(name, token, vocab_size, owner=None):
    """Raises a ValueError naming `owner` unless `token` is None or an integer
    id below `vocab_size` (floats, strings and bools are refused)."""
    where = f"{owner}: " if owner else ""
    if token is None:
        return
    if not _is_integer(token):
        raise ValueError(
            f"{where}`{name}` must be None or an integer token id in [0, {vocab_size}); "
            f"received {token!r} ({type(token).__name__})."
        )
    if not 0 <= token < vocab_size:
        raise ValueError(
            f"{where}`{name}={token}` is outside the vocabulary (vocab_size={vocab_size})."
        )


def prompt_bucket(longest, max_length, max_new_tokens, length_dependent=False):
    """The padded prompt length: the smallest bucket holding `longest`, within
    `max_length` (None: no table). Under a length-dependent rope scaling
    (`dynamic`, `longrope`) it is `longest` itself, so the prompt is encoded
    at its own length as transformers encodes it."""
    if length_dependent:
        return longest
    bucket = next((b for b in PROMPT_BUCKETS if b >= longest), longest)
    if max_length is not None:
        bucket = min(bucket, max_length - max_new_tokens)
    return max(bucket, longest)


def new_tokens(tokens, lengths, max_new_tokens):
    """The `max_new_tokens` tokens after each row's prompt."""
    return np.stack(
        [row[length : length + max_new_tokens] for row, length in zip(tokens, lengths)]
    )
