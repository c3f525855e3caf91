"""Checkpoint families: one declaration each (`CheckpointFamily`), looked up
by every module that needs to know a family. Importing this package declares
every built-in family, in the order below (which `recognise_config` and the
name-marker hint follow)."""

from keras_attn.checkpoints.families import bert  # noqa: F401
from keras_attn.checkpoints.families import roberta  # noqa: F401
from keras_attn.checkpoints.families import albert  # noqa: F401
from keras_attn.checkpoints.families import electra  # noqa: F401
from keras_attn.checkpoints.families import roformer  # noqa: F401
from keras_attn.checkpoints.families import nezha  # noqa: F401
from keras_attn.checkpoints.families import gau_alpha  # noqa: F401
from keras_attn.checkpoints.families import gpt  # noqa: F401
from keras_attn.checkpoints.families import gpt2  # noqa: F401
from keras_attn.checkpoints.families import gpt2_ml  # noqa: F401
from keras_attn.checkpoints.families import t5  # noqa: F401
from keras_attn.checkpoints.families import llama  # noqa: F401
from keras_attn.checkpoints.families import mistral  # noqa: F401
from keras_attn.checkpoints.families import qwen2  # noqa: F401
from keras_attn.checkpoints.families import qwen3  # noqa: F401
from keras_attn.checkpoints.families import gemma  # noqa: F401
from keras_attn.checkpoints.families import gemma2  # noqa: F401
from keras_attn.checkpoints.families import gemma3  # noqa: F401
from keras_attn.checkpoints.families import phi3  # noqa: F401
from keras_attn.checkpoints.families import modernbert  # noqa: F401
from keras_attn.checkpoints.families import deberta_v2  # noqa: F401
from keras_attn.checkpoints.families.family import FAMILIES
from keras_attn.checkpoints.families.family import GOOGLE_CONFIG_FAMILY
from keras_attn.checkpoints.families.family import MARKER_KINDS
from keras_attn.checkpoints.families.family import CheckpointFamily
from keras_attn.checkpoints.families.family import Marker
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
