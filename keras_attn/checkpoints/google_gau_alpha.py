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

from keras_attn import layer_names as names
from keras_attn.checkpoints import google_bert
from keras_attn.checkpoints.source import Source
from keras_attn.checkpoints.source import tensorflow_dense

_GAU = "GAU_alpha/encoder/layer_{layer}/gau"
_LAYER = names.gated_attention_unit("{layer}")

NAME_TABLE = google_bert.NAME_TABLE.replace(entries={
    f"{names.EMBEDDING_TOKEN}/embeddings": Source("bert/embeddings/word_embeddings"),
    f"{names.EMBEDDING_SEGMENT}/embeddings": Source("bert/embeddings/token_type_embeddings"),
    **tensorflow_dense(f"{_LAYER}/input_dense", f"{_GAU}/i_dense"),
    **{
        f"{_LAYER}/{side}_{weight}": Source(f"{_GAU}/{side[0]}_scaleoffset/{stored}")
        for side in ("query", "key")
        for weight, stored in (("scale", "gamma"), ("offset", "beta"))
    },
    **tensorflow_dense(f"{_LAYER}/output_dense", f"{_GAU}/o_dense"),
})
