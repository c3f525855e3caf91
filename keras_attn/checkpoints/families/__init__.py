"""Checkpoint families: one declaration each (`CheckpointFamily`), looked up
by every module that needs to know a family.

`BUILT_IN_NAMES` is the one list that registers the built-in families, in
the order of priority: where two families' `recognises_config` both claim a
config, or two markers of one kind both match a checkpoint, the earlier
family's wins. A name `x` in it is the module `families/x.py`, which
declares the family `X` (its name in upper case, exported here as
`families.X`); the declaration's `variant_modules` are the modules of
`keras_attn.models` that `keras_attn.models` imports for it. Importing a
declaration's module registers nothing, so the order in which they are
imported changes nothing.
"""

import importlib

from keras_attn.checkpoints.families.family import FAMILIES
from keras_attn.checkpoints.families.family import GOOGLE_CONFIG_FAMILY
from keras_attn.checkpoints.families.family import MARKER_KINDS
from keras_attn.checkpoints.families.family import CheckpointFamily
from keras_attn.checkpoints.families.family import Marker
from keras_attn.checkpoints.families.family import application_for_architecture
from keras_attn.checkpoints.families.family import default_variant
from keras_attn.checkpoints.families.family import for_model_type
from keras_attn.checkpoints.families.family import get
from keras_attn.checkpoints.families.family import markers
from keras_attn.checkpoints.families.family import model_types
from keras_attn.checkpoints.families.family import names
from keras_attn.checkpoints.families.family import readable_families
from keras_attn.checkpoints.families.family import recognise_config
from keras_attn.checkpoints.families.family import register_family
from keras_attn.checkpoints.families.family import variant_mismatch

# The built-in families, highest priority first (ALBERT's config fields
# are tried before NEZHA's). Adding a family is adding its name here.
BUILT_IN_NAMES = (
    "bert", "roberta", "albert", "electra", "roformer", "nezha", "gau_alpha",
    "gpt", "gpt2", "gpt2_ml", "t5",
    "llama", "mistral", "qwen2", "qwen3", "gemma", "gemma2", "gemma3", "phi3",
    "modernbert", "deberta_v2",
)


def _declaration(name):
    """The `CheckpointFamily` that `families/<name>.py` declares as `NAME`."""
    module = importlib.import_module(f"{__name__}.{name}")
    family = getattr(module, name.upper(), None)
    if not isinstance(family, CheckpointFamily) or family.name != name:
        raise TypeError(
            f"{module.__file__} must declare `{name.upper()} = CheckpointFamily("
            f"name={name!r}, ...)` (BUILT_IN_NAMES lists {name!r}); found {family!r}."
        )
    return family


# The declarations of `BUILT_IN_NAMES`, in its order.
BUILT_IN = tuple(_declaration(name) for name in BUILT_IN_NAMES)

for _family in BUILT_IN:
    globals()[_family.name.upper()] = _family
    register_family(_family)
del _family
