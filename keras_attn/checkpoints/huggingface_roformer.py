"""Name table: Hugging Face RoFormer weights (`model_type: roformer`,
`RoFormerModel`, `RoFormerForMaskedLM`, safetensors or PyTorch) onto this
library's variables.

RoFormer stores BERT's names (`huggingface_bert`) under the `roformer.`
prefix of its task models, without a position table: its sinusoids are a
frozen parameter (`encoder.embed_positions.weight`) from which transformers
takes the rotation angles, and which this library's rotary layers compute.
`check_stored` compares the stored table with the standard one and
refuses a checkpoint whose table differs (it would change the outputs).
Factorised embeddings (`embedding_size` other than `hidden_size`) are
mapped to the hidden width by `embeddings_project`, BERT's
`Embedding-Mapping`.
"""

import numpy as np

from keras_attn import layer_names as names
from keras_attn.checkpoints import huggingface_bert
from keras_attn.checkpoints.name_table import prefixed
from keras_attn.checkpoints.source import torch_linear

PREFIXES = ("", "roformer.")
candidates = prefixed(*PREFIXES)

# The stored sinusoids, read by `check_stored` only.
SINUSOIDS = "encoder.embed_positions.weight"


# The largest difference from the standard sinusoids a stored table may
# have: float32 rounding of the angles' sines and cosines.
SINUSOID_TOLERANCE = 1e-5


def standard_sinusoids(positions, dim):
    """transformers' RoFormer table `(positions, dim)`: column `k` is
    `sin(n / 10000^(2k / dim))` and column `dim / 2 + k` the cosine of the
    same angle (the sines first, not interleaved)."""
    half = (dim + 1) // 2
    angles = np.arange(positions)[:, None] / 10000.0 ** (2 * np.arange(half)[None] / dim)
    return np.concatenate([np.sin(angles), np.cos(angles[:, : dim - half])], axis=1)


def check_stored(reader, model):
    """Why the checkpoint's stored sinusoid table is not the one this
    library's rotary positions compute (a list of sentences, empty when it
    is, or when there is none)."""
    name = next((c for c in candidates(SINUSOIDS) if c in reader), None)
    if name is None:
        return []
    table = np.asarray(reader.read(name), np.float64)
    key_size = model.template.config.key_size
    if table.ndim != 2 or table.shape[1] != key_size:
        return [
            f"{name} has shape {table.shape}; rotary positions over key_size={key_size} "
            f"need (positions, {key_size})"
        ]
    difference = float(np.max(np.abs(table - standard_sinusoids(*table.shape)), initial=0.0))
    if difference > SINUSOID_TOLERANCE:
        return [
            f"{name} differs from the standard sinusoids (sin(n / 10000^(2k/d)) then the "
            f"cosines) by up to {difference:.3g} > {SINUSOID_TOLERANCE:g}; transformers "
            "rotates by the stored table, this library by the standard one"
        ]
    return []


NAME_TABLE = huggingface_bert.NAME_TABLE.replace(
    entries={
        **huggingface_bert.ENTRIES,
        **torch_linear(names.EMBEDDING_MAPPING, "embeddings_project"),
    },
    spellings=candidates,
    prefixes=PREFIXES,
    ignored=(SINUSOIDS,),
    duplicates={"cls.predictions.decoder.weight": "embeddings.word_embeddings.weight"},
    check_stored=check_stored,
)
