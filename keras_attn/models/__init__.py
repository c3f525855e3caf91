"""The model builder and its variants.

Importing this package registers every built-in variant: each variant module
registers itself with `register_variant` when imported, and
`import_built_in_variants` imports them all.
"""

from keras_attn.models.registry import VARIANTS
from keras_attn.models.registry import import_built_in_variants
from keras_attn.models.registry import register_variant
from keras_attn.models.transformer import Transformer
from keras_attn.models.passes import FULL_PASS
from keras_attn.models.passes import DecodeStep
from keras_attn.models.passes import FullPass
from keras_attn.models.transformer_block import TransformerBlock
from keras_attn.models.transformer_config import AttentionConfig
from keras_attn.models.transformer_config import FeedForwardConfig
from keras_attn.models.transformer_config import NormConfig
from keras_attn.models.transformer_config import PositionConfig
from keras_attn.models.transformer_config import TransformerConfig
from keras_attn.models.config_files import load_config
from keras_attn.models.transformer_model import TransformerModel
from keras_attn.models.input_contract import InputContract
from keras_attn.models.input_contract import InputError
from keras_attn.models.layout_map import get_layout_map
from keras_attn.models.builder import build_transformer_model
from keras_attn.checkpoints.loading import load_checkpoint

# The built-in variants, registered on import: the modules every built-in
# family's declaration names (`keras_attn.checkpoints.families.BUILT_IN_NAMES`,
# in its order) and `registry.VARIANT_MODULES_WITHOUT_FAMILY`. Each variant's
# class is exported here under its own name (`keras_attn.models.Bert`).
for _variant_class in import_built_in_variants():
    globals()[_variant_class.__name__] = _variant_class
del _variant_class

# A T-TA model with its configuration as arguments (not a variant).
from keras_attn.models.tta_encoder import TTAEncoder  # noqa: E402
