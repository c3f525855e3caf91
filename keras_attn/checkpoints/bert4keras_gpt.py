"""Name tables: the TensorFlow checkpoints bert4keras reads for GPT
(CDial-GPT), GPT-2 (its converted GPT-2 checkpoints, CPM-LM) and GPT2-ML,
onto this library's variables.

GPT and GPT-2 are BERT's Google names renamed, as bert4keras renames them:
`bert/` is `gpt/` and `encoder` is `transformer`; GPT-2's block norms come
before their sub-layers and are stored as `input/LayerNorm`, its final norm
as `gpt/output/LayerNorm`. GPT2-ML keeps the names of its own release
(`newslm/...`). Kernels are `(in, out)`, as in Keras.
"""

from types import SimpleNamespace

from keras_attn.checkpoints import google_bert
from keras_attn.checkpoints.source import Source

_HEADS = ("Pooler-Dense/", "NSP/", "MLM-")


def _renamed(source, *replacements):
    names = []
    for name in source.names:
        for old, new in replacements:
            name = name.replace(old, new)
        names.append(name)
    return Source(*names, transpose=source.transpose)


# BERT's table without ALBERT's names (its shared block, read by every block
# of `albert_unshared` too) and the heads GPT does not have.
_BERT = {
    path: Source(
        *(name for name in source.names if "/transformer/group_" not in name),
        transpose=source.transpose,
    )
    for path, source in google_bert.TABLE.items()
    if "{layer}" in path or path.startswith("Embedding-")
}

GPT_TABLE = {
    path: _renamed(source, ("bert/", "gpt/"), ("encoder", "transformer"))
    for path, source in _BERT.items()
}

GPT2_TABLE = {
    path: _renamed(source, ("output/LayerNorm", "input/LayerNorm"))
    for path, source in GPT_TABLE.items()
} | {
    "Output-Norm/gamma": Source("gpt/output/LayerNorm/gamma"),
    "Output-Norm/beta": Source("gpt/output/LayerNorm/beta"),
}

_LAYER = "newslm/layer{layer:02d}"
_ATTENTION = "Transformer-{layer}-MultiHeadSelfAttention"
_FEED_FORWARD = "Transformer-{layer}-FeedForward"
GPT2_ML_TABLE = {
    "Embedding-Token/embeddings": Source("newslm/embeddings/word_embed"),
    "Embedding-Position/embeddings": Source("newslm/embeddings/pos_embed"),
    "Embedding-Norm/gamma": Source("newslm/embeddings/LayerNorm_embed_norm/gamma"),
    "Embedding-Norm/beta": Source("newslm/embeddings/LayerNorm_embed_norm/beta"),
    f"{_ATTENTION}/query_dense/kernel": Source(f"{_LAYER}/query_layer/kernel"),
    f"{_ATTENTION}/query_dense/bias": Source(f"{_LAYER}/query_layer/bias"),
    f"{_ATTENTION}/key_dense/kernel": Source(f"{_LAYER}/key_layer/kernel"),
    f"{_ATTENTION}/key_dense/bias": Source(f"{_LAYER}/key_layer/bias"),
    f"{_ATTENTION}/value_dense/kernel": Source(f"{_LAYER}/value_layer/kernel"),
    f"{_ATTENTION}/value_dense/bias": Source(f"{_LAYER}/value_layer/bias"),
    f"{_ATTENTION}/output_dense/kernel": Source(f"{_LAYER}/context_projection_layer/kernel"),
    f"{_ATTENTION}/output_dense/bias": Source(f"{_LAYER}/context_projection_layer/bias"),
    f"{_FEED_FORWARD}-Norm-0/gamma": Source(f"{_LAYER}/LayerNorm_mlp_ln0/gamma"),
    f"{_FEED_FORWARD}-Norm-0/beta": Source(f"{_LAYER}/LayerNorm_mlp_ln0/beta"),
    f"{_FEED_FORWARD}/intermediate_dense/kernel": Source(f"{_LAYER}/intermediate/kernel"),
    f"{_FEED_FORWARD}/intermediate_dense/bias": Source(f"{_LAYER}/intermediate/bias"),
    f"{_FEED_FORWARD}/output_dense/kernel": Source(f"{_LAYER}/output/kernel"),
    f"{_FEED_FORWARD}/output_dense/bias": Source(f"{_LAYER}/output/bias"),
    f"{_FEED_FORWARD}-Norm-1/gamma": Source(f"{_LAYER}/LayerNorm_mlp_ln1/gamma"),
    f"{_FEED_FORWARD}-Norm-1/beta": Source(f"{_LAYER}/LayerNorm_mlp_ln1/beta"),
}


def _name_table(table):
    """A name-table module's interface (see `porting.port_weights`)."""
    return SimpleNamespace(
        TABLE=table,
        IGNORED=google_bert.IGNORED,
        DUPLICATES={},
        candidates=google_bert.candidates,
    )


GPT = _name_table(GPT_TABLE)
GPT2 = _name_table(GPT2_TABLE)
GPT2_ML = _name_table(GPT2_ML_TABLE)
