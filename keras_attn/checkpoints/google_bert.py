"""Name table: Google's TensorFlow BERT checkpoints (and RoBERTa+, which
are stored the same way, and ALBERT, which differs only in its shared
block) onto this library's variables.

A block of its own per layer (`Transformer-{layer}-...`) reads BERT's
`bert/encoder/layer_{layer}`, or else ALBERT's one shared block (the
`albert_unshared` variant: each layer starts from a copy, as bert4keras's
`ALBERT_Unshared` loads it). Kernels are stored `(in, out)`, as Keras keeps
them, except the next-sentence (ALBERT: sentence-order) weights. Google's
release always ties the masked-LM decoder to the token embedding, so an
untied `MLM-Decoder` has no name here: a model built with
`tie_word_embeddings=False` is refused rather than left random.
"""

from keras_attn import layer_names as names
from keras_attn.checkpoints.name_table import NameTable
from keras_attn.checkpoints.source import Source
from keras_attn.checkpoints.source import bert_block
from keras_attn.checkpoints.source import tensorflow_dense
from keras_attn.checkpoints.source import tensorflow_layer_norm
from keras_attn.checkpoints.source import under_scope

# Where a block's layers are stored, by role (see `source.block_layers`).
BERT_LAYER = under_scope("bert/encoder/layer_{layer}", {
    "query": "attention/self/query",
    "key": "attention/self/key",
    "value": "attention/self/value",
    "attention_output": "attention/output/dense",
    "attention_norm": "attention/output/LayerNorm",
    "intermediate": "intermediate/dense",
    "output": "output/dense",
    "feed_forward_norm": "output/LayerNorm",
}, "/")
# ALBERT's one block, shared by every layer (Google's group 0, inner layer 0;
# released ALBERTs have no other).
ALBERT_LAYER = under_scope("bert/encoder/transformer/group_0/inner_group_0", {
    "query": "attention_1/self/query",
    "key": "attention_1/self/key",
    "value": "attention_1/self/value",
    "attention_output": "attention_1/output/dense",
    "attention_norm": "LayerNorm",
    "intermediate": "ffn_1/intermediate/dense",
    "output": "ffn_1/intermediate/output/dense",
    "feed_forward_norm": "LayerNorm_1",
}, "/")

EMBEDDINGS = {
    f"{names.EMBEDDING_TOKEN}/embeddings": Source("bert/embeddings/word_embeddings"),
    f"{names.EMBEDDING_SEGMENT}/embeddings": Source("bert/embeddings/token_type_embeddings"),
    f"{names.EMBEDDING_POSITION}/embeddings": Source("bert/embeddings/position_embeddings"),
    **tensorflow_layer_norm(names.EMBEDDING_NORM, "bert/embeddings/LayerNorm"),
    **tensorflow_dense(names.EMBEDDING_MAPPING, "bert/encoder/embedding_hidden_mapping_in"),
}

NAME_TABLE = NameTable(
    entries={
        **EMBEDDINGS,
        **bert_block("{layer}", BERT_LAYER, ALBERT_LAYER),
        **bert_block(None, ALBERT_LAYER),
        **tensorflow_dense(names.POOLER, "bert/pooler/dense"),
        f"{names.NSP}/kernel": Source("cls/seq_relationship/output_weights", transpose=True),
        f"{names.NSP}/bias": Source("cls/seq_relationship/output_bias"),
        **tensorflow_dense(names.MLM_DENSE, "cls/predictions/transform/dense"),
        **tensorflow_layer_norm(names.MLM_NORM, "cls/predictions/transform/LayerNorm"),
        f"{names.MLM_BIAS}/bias": Source("cls/predictions/output_bias"),
    },
    # Stored alongside the weights by training, never model variables.
    ignored=("global_step", "/adam_m", "/adam_v", "good_steps", "loss_scale"),
)
