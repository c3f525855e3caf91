"""Checkpoint families: one declaration each (`CheckpointFamily`), looked up
by every module that needs to know a family.

`BUILT_IN` is the one list that registers them, in the order of priority:
where two families' `recognises_config` both claim a config, or two
markers of one kind both match a checkpoint, the earlier family's wins.
Importing the declarations' modules registers nothing, so the order in
which they are imported changes nothing.
"""

from keras_attn.checkpoints.families.albert import ALBERT
from keras_attn.checkpoints.families.bert import BERT
from keras_attn.checkpoints.families.deberta_v2 import DEBERTA_V2
from keras_attn.checkpoints.families.electra import ELECTRA
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
from keras_attn.checkpoints.families.gau_alpha import GAU_ALPHA
from keras_attn.checkpoints.families.gemma import GEMMA
from keras_attn.checkpoints.families.gemma2 import GEMMA2
from keras_attn.checkpoints.families.gemma3 import GEMMA3
from keras_attn.checkpoints.families.gpt import GPT
from keras_attn.checkpoints.families.gpt2 import GPT2
from keras_attn.checkpoints.families.gpt2_ml import GPT2_ML
from keras_attn.checkpoints.families.llama import LLAMA
from keras_attn.checkpoints.families.mistral import MISTRAL
from keras_attn.checkpoints.families.modernbert import MODERNBERT
from keras_attn.checkpoints.families.nezha import NEZHA
from keras_attn.checkpoints.families.phi3 import PHI3
from keras_attn.checkpoints.families.qwen2 import QWEN2
from keras_attn.checkpoints.families.qwen3 import QWEN3
from keras_attn.checkpoints.families.roberta import ROBERTA
from keras_attn.checkpoints.families.roformer import ROFORMER
from keras_attn.checkpoints.families.t5 import T5

# The built-in families, highest priority first (ALBERT's config fields
# are tried before NEZHA's).
BUILT_IN = (
    BERT, ROBERTA, ALBERT, ELECTRA, ROFORMER, NEZHA, GAU_ALPHA, GPT, GPT2, GPT2_ML, T5,
    LLAMA, MISTRAL, QWEN2, QWEN3, GEMMA, GEMMA2, GEMMA3, PHI3, MODERNBERT, DEBERTA_V2,
)

for _family in BUILT_IN:
    register_family(_family)
