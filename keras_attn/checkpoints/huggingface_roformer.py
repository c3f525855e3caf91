"""Name table: Hugging Face RoFormer weights (`model_type: roformer`,
`RoFormerModel`, `RoFormerForMaskedLM`, safetensors or PyTorch) onto this
library's variables.

RoFormer stores BERT's names (`huggingface_bert`) under the `roformer.`
prefix of its task models, without a position table: its sinusoids are a
frozen buffer-like parameter (`encoder.embed_positions.weight`) that the
attention layers recompute, so it is ignored. Factorised embeddings
(`embedding_size` other than `hidden_size`) are mapped to the hidden width
by `embeddings_project`, BERT's `Embedding-Mapping`.
"""

from keras_attn.checkpoints import huggingface_bert
from keras_attn.checkpoints.porting import Source

TABLE = {
    **huggingface_bert.TABLE,
    "Embedding-Mapping/kernel": Source("embeddings_project.weight", transpose=True),
    "Embedding-Mapping/bias": Source("embeddings_project.bias"),
}

PREFIXES = ("", "roformer.")

IGNORED = ("encoder.embed_positions.weight",)

DUPLICATES = {"cls.predictions.decoder.weight": "embeddings.word_embeddings.weight"}


def candidates(name):
    """Every spelling under which `name` may be stored."""
    for prefix in PREFIXES:
        yield prefix + name
