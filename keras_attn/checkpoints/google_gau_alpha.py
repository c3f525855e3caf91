"""Name table: ZhuiyiTechnology's GAU-alpha checkpoints (Google's TensorFlow
format, as bert4keras reads them with `GAU_alpha.variable_mapping`) onto
this library's variables.

The embeddings keep BERT's names (`bert/embeddings/...`, no position
table); each block is one Gated Attention Unit under
`GAU_alpha/encoder/layer_{layer}/gau/`: `i_dense` (the `[u, v, z]`
projection), `q_scaleoffset` and `k_scaleoffset` (per-feature scales
`gamma` and offsets `beta`), `o_dense`. The released GAU-alpha has no
biases and no offsets; their rows are here for models built with biases.
The norms have no parameters and the masked-LM head is the tied token
embedding, so nothing else is stored. Kernels are `(in, out)`, as in Keras.
"""

from keras_attn.checkpoints import google_bert
from keras_attn.checkpoints.source import Source

_GAU = "GAU_alpha/encoder/layer_{layer}/gau"
_LAYER = "Transformer-{layer}-GatedAttentionUnit"

TABLE = {
    "Embedding-Token/embeddings": Source("bert/embeddings/word_embeddings"),
    "Embedding-Segment/embeddings": Source("bert/embeddings/token_type_embeddings"),
    f"{_LAYER}/input_dense/kernel": Source(f"{_GAU}/i_dense/kernel"),
    f"{_LAYER}/input_dense/bias": Source(f"{_GAU}/i_dense/bias"),
    f"{_LAYER}/query_scale": Source(f"{_GAU}/q_scaleoffset/gamma"),
    f"{_LAYER}/query_offset": Source(f"{_GAU}/q_scaleoffset/beta"),
    f"{_LAYER}/key_scale": Source(f"{_GAU}/k_scaleoffset/gamma"),
    f"{_LAYER}/key_offset": Source(f"{_GAU}/k_scaleoffset/beta"),
    f"{_LAYER}/output_dense/kernel": Source(f"{_GAU}/o_dense/kernel"),
    f"{_LAYER}/output_dense/bias": Source(f"{_GAU}/o_dense/bias"),
}

IGNORED = google_bert.IGNORED
DUPLICATES = {}
candidates = google_bert.candidates
