"""Name tables: the TensorFlow checkpoints bert4keras reads for GPT
(CDial-GPT), GPT-2 (its converted GPT-2 checkpoints, CPM-LM) and GPT2-ML,
onto this library's variables.

GPT and GPT-2 are BERT's Google names renamed, as bert4keras renames them:
`bert/` is `gpt/` and `encoder` is `transformer`; GPT-2's block norms come
before their sub-layers and are stored as `input/LayerNorm`, its final norm
as `gpt/output/LayerNorm`. GPT2-ML keeps the names of its own release
(`newslm/...`). Kernels are `(in, out)`, as in Keras.
"""

from keras_attn import layer_names as names
from keras_attn.checkpoints import google_bert
from keras_attn.checkpoints.source import Source
from keras_attn.checkpoints.source import tensorflow_dense
from keras_attn.checkpoints.source import tensorflow_layer_norm


def _renamed(source, *replacements):
    renamed = []
    for name in source.names:
        for old, new in replacements:
            name = name.replace(old, new)
        renamed.append(name)
    return Source(*renamed, transpose=source.transpose)


# BERT's table without ALBERT's names (its shared block, read by every block
# of `albert_unshared` too) and the heads GPT does not have.
_BERT = {
    path: Source(
        *(name for name in source.names if "/transformer/group_" not in name),
        transpose=source.transpose,
    )
    for path, source in google_bert.NAME_TABLE.entries.items()
    if "{layer}" in path or path.startswith(names.EMBEDDING_LAYERS)
}

_GPT = {
    path: _renamed(source, ("bert/", "gpt/"), ("encoder", "transformer"))
    for path, source in _BERT.items()
}

GPT = google_bert.NAME_TABLE.replace(entries=_GPT)

GPT2 = google_bert.NAME_TABLE.replace(entries={
    **{
        path: _renamed(source, ("output/LayerNorm", "input/LayerNorm"))
        for path, source in _GPT.items()
    },
    **tensorflow_layer_norm(names.OUTPUT_NORM, "gpt/output/LayerNorm"),
})

_LAYER = "newslm/layer{layer:02d}"
_ATTENTION = names.attention("{layer}")
_FEED_FORWARD = names.feed_forward("{layer}")

GPT2_ML = google_bert.NAME_TABLE.replace(entries={
    f"{names.EMBEDDING_TOKEN}/embeddings": Source("newslm/embeddings/word_embed"),
    f"{names.EMBEDDING_POSITION}/embeddings": Source("newslm/embeddings/pos_embed"),
    **tensorflow_layer_norm(names.EMBEDDING_NORM, "newslm/embeddings/LayerNorm_embed_norm"),
    **tensorflow_dense(f"{_ATTENTION}/query_dense", f"{_LAYER}/query_layer"),
    **tensorflow_dense(f"{_ATTENTION}/key_dense", f"{_LAYER}/key_layer"),
    **tensorflow_dense(f"{_ATTENTION}/value_dense", f"{_LAYER}/value_layer"),
    **tensorflow_dense(f"{_ATTENTION}/output_dense", f"{_LAYER}/context_projection_layer"),
    **tensorflow_layer_norm(names.norm(_FEED_FORWARD, 0), f"{_LAYER}/LayerNorm_mlp_ln0"),
    **tensorflow_dense(f"{_FEED_FORWARD}/intermediate_dense", f"{_LAYER}/intermediate"),
    **tensorflow_dense(f"{_FEED_FORWARD}/output_dense", f"{_LAYER}/output"),
    **tensorflow_layer_norm(names.norm(_FEED_FORWARD, 1), f"{_LAYER}/LayerNorm_mlp_ln1"),
})
