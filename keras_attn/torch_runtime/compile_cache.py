"""Where torch keeps the compile caches of what keras_attn compiles, so
that a second process reuses the first one's work."""

import logging
import os
from typing import NamedTuple

from keras_attn.torch_runtime import settings

SWITCH = "KERAS_ATTN_TORCH_COMPILE_CACHE"
TORCH_FOLDER = "TORCHINDUCTOR_CACHE_DIR"
# The folder an earlier `ensure` in this process set, if any.
_set_here = None


class CompileCache(NamedTuple):
    """Where torch's compile caches are and which of them are on.

    Attributes:
        folder: the folder torch keeps them in (`TORCHINDUCTOR_CACHE_DIR`),
            or None where keras_attn leaves torch's settings alone and
            none is set yet.
        chosen_by: what chose `folder`: `"KERAS_ATTN_TORCH_COMPILE_CACHE"`
            (keras_attn's default folder or the switch's folder),
            `"TORCHINDUCTOR_CACHE_DIR"` (the user's folder), or
            `"torch"` (the switch is off, or keras_attn's folder could not
            be made).
        fx_graph_cache: whether inductor reuses compiled graphs across
            processes (`torch._inductor.config.fx_graph_cache`).
        autograd_cache: whether AOTAutograd reuses its traced graphs
            across processes (`torch._functorch.config.enable_autograd_cache`).
    """

    folder: str | None
    chosen_by: str
    fx_graph_cache: bool
    autograd_cache: bool


def default_folder():
    """keras_attn's folder for torch's compile caches: `keras_attn/torch_compile`
    under `$XDG_CACHE_HOME`, or under `~/.cache` where that is unset."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "keras_attn", "torch_compile")


def ensure():
    """Points torch's persistent compile caches (inductor's FX graph cache,
    AOTAutograd's cache) at one folder before keras_attn compiles anything
    (`CompiledStep`, `CompiledBlocks`), so that a later process reuses them,
    and says where they are.

    `KERAS_ATTN_TORCH_COMPILE_CACHE` (`settings.current().compile_cache`):
    on (the default), the user's `TORCHINDUCTOR_CACHE_DIR` where set (torch's
    own default does not count), else `default_folder()`, set as
    `TORCHINDUCTOR_CACHE_DIR` for this process and its children; a folder
    (absolute, or starting with `~`), that folder unless the user's
    `TORCHINDUCTOR_CACHE_DIR` is set; off, nothing is set. A process keeps
    the first folder set; a folder that cannot be made is a logged warning.
    keras_attn never turns torch's caches on or off.

    Returns:
        A `CompileCache`.

    Raises:
        ValueError: `KERAS_ATTN_TORCH_COMPILE_CACHE`, or another switch,
            holds a value it does not take (a relative path, say).

    Example:

    ```python
    from keras_attn.torch_runtime import compile_cache

    cache = compile_cache.ensure()
    print(cache.folder, cache.chosen_by)
    ```
    """
    global _set_here
    import torch._functorch.config
    import torch._inductor.config

    value = setting()
    folder, chosen_by = os.environ.get(TORCH_FOLDER), TORCH_FOLDER
    if value is False:
        chosen_by = "torch"
    elif folder and folder == _set_here:
        chosen_by = SWITCH
    elif not folder or _is_torchs_default(folder):
        folder = default_folder() if value is True else value
        try:
            os.makedirs(folder, exist_ok=True)
        except OSError as error:
            logging.getLogger("keras_attn").warning(
                "keras_attn: cannot make the folder for torch's compile caches (%s: %s); "
                "torch keeps them where it chooses. Set %s to a folder you can write, or "
                "to 0 to leave the choice to torch.", type(error).__name__, error, SWITCH,
            )
            folder, chosen_by = os.environ.get(TORCH_FOLDER), "torch"
        else:
            os.environ[TORCH_FOLDER] = _set_here = folder
            chosen_by = SWITCH
    return CompileCache(
        folder=folder or None,
        chosen_by=chosen_by,
        fx_graph_cache=bool(torch._inductor.config.fx_graph_cache),
        autograd_cache=bool(torch._functorch.config.enable_autograd_cache),
    )


def _is_torchs_default(folder):
    """Whether `folder` is the one torch picks for itself (and writes into
    `TORCHINDUCTOR_CACHE_DIR` when dynamo is imported), not a choice of
    the user's."""
    try:
        from torch._inductor.runtime.cache_dir_utils import default_cache_dir
    except ImportError:  # another torch layout: take every folder for the user's
        return False
    return os.path.abspath(folder) == os.path.abspath(default_cache_dir())


def setting():
    """`KERAS_ATTN_TORCH_COMPILE_CACHE` as read: True (on: the default
    folder), False (off) or a folder path."""
    return settings.current().compile_cache
