"""The checkpoint fixtures of tests/models, shared here by import."""

from tests.models.conftest import hf_bert_dir  # noqa: F401
from tests.models.conftest import hf_roberta_dir  # noqa: F401
from tests.models.conftest import tf_bert_checkpoint  # noqa: F401
