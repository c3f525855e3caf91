"""Name table: Google's TensorFlow BERT checkpoints (and RoBERTa+, which
are stored the same way, and ALBERT, which differs only in its shared
block) onto this library's variables.

Keys are Keras variable paths (`{layer}` stands for the block index); values
are the checkpoint names. Weights no checkpoint holds (talking-heads mixing,
KERPLE's parameters) are declared by their layers and keep their initial
values, so the table has no rows for them. Kernels are stored as
`(in, out)`, as Keras keeps them, except the next-sentence (ALBERT:
sentence-order) weights.
A block of its own per layer (`Transformer-{layer}-...`) reads BERT's
`bert/encoder/layer_{layer}`, or else ALBERT's one shared block (the
`albert_unshared` variant: each layer starts from a copy, as bert4keras's
`ALBERT_Unshared` loads it).
Google's release always ties the masked-LM decoder to the token embedding,
so an untied `MLM-Decoder` has no name here: a model built with
`tie_word_embeddings=False` is refused rather than left random.
"""

from keras_attn.checkpoints.source import Source

_LAYER = "bert/encoder/layer_{layer}"
_ALBERT = "bert/encoder/transformer/group_0/inner_group_0"

TABLE = {
    "Embedding-Token/embeddings": Source("bert/embeddings/word_embeddings"),
    "Embedding-Segment/embeddings": Source("bert/embeddings/token_type_embeddings"),
    "Embedding-Position/embeddings": Source("bert/embeddings/position_embeddings"),
    "Embedding-Norm/gamma": Source("bert/embeddings/LayerNorm/gamma"),
    "Embedding-Norm/beta": Source("bert/embeddings/LayerNorm/beta"),
    "Embedding-Mapping/kernel": Source("bert/encoder/embedding_hidden_mapping_in/kernel"),
    "Embedding-Mapping/bias": Source("bert/encoder/embedding_hidden_mapping_in/bias"),
    "Transformer-{layer}-MultiHeadSelfAttention/query_dense/kernel": Source(f"{_LAYER}/attention/self/query/kernel", f"{_ALBERT}/attention_1/self/query/kernel"),
    "Transformer-{layer}-MultiHeadSelfAttention/query_dense/bias": Source(f"{_LAYER}/attention/self/query/bias", f"{_ALBERT}/attention_1/self/query/bias"),
    "Transformer-{layer}-MultiHeadSelfAttention/key_dense/kernel": Source(f"{_LAYER}/attention/self/key/kernel", f"{_ALBERT}/attention_1/self/key/kernel"),
    "Transformer-{layer}-MultiHeadSelfAttention/key_dense/bias": Source(f"{_LAYER}/attention/self/key/bias", f"{_ALBERT}/attention_1/self/key/bias"),
    "Transformer-{layer}-MultiHeadSelfAttention/value_dense/kernel": Source(f"{_LAYER}/attention/self/value/kernel", f"{_ALBERT}/attention_1/self/value/kernel"),
    "Transformer-{layer}-MultiHeadSelfAttention/value_dense/bias": Source(f"{_LAYER}/attention/self/value/bias", f"{_ALBERT}/attention_1/self/value/bias"),
    "Transformer-{layer}-MultiHeadSelfAttention/output_dense/kernel": Source(f"{_LAYER}/attention/output/dense/kernel", f"{_ALBERT}/attention_1/output/dense/kernel"),
    "Transformer-{layer}-MultiHeadSelfAttention/output_dense/bias": Source(f"{_LAYER}/attention/output/dense/bias", f"{_ALBERT}/attention_1/output/dense/bias"),
    "Transformer-{layer}-MultiHeadSelfAttention-Norm/gamma": Source(f"{_LAYER}/attention/output/LayerNorm/gamma", f"{_ALBERT}/LayerNorm/gamma"),
    "Transformer-{layer}-MultiHeadSelfAttention-Norm/beta": Source(f"{_LAYER}/attention/output/LayerNorm/beta", f"{_ALBERT}/LayerNorm/beta"),
    "Transformer-{layer}-FeedForward/intermediate_dense/kernel": Source(f"{_LAYER}/intermediate/dense/kernel", f"{_ALBERT}/ffn_1/intermediate/dense/kernel"),
    "Transformer-{layer}-FeedForward/intermediate_dense/bias": Source(f"{_LAYER}/intermediate/dense/bias", f"{_ALBERT}/ffn_1/intermediate/dense/bias"),
    "Transformer-{layer}-FeedForward/output_dense/kernel": Source(f"{_LAYER}/output/dense/kernel", f"{_ALBERT}/ffn_1/intermediate/output/dense/kernel"),
    "Transformer-{layer}-FeedForward/output_dense/bias": Source(f"{_LAYER}/output/dense/bias", f"{_ALBERT}/ffn_1/intermediate/output/dense/bias"),
    "Transformer-{layer}-FeedForward-Norm/gamma": Source(f"{_LAYER}/output/LayerNorm/gamma", f"{_ALBERT}/LayerNorm_1/gamma"),
    "Transformer-{layer}-FeedForward-Norm/beta": Source(f"{_LAYER}/output/LayerNorm/beta", f"{_ALBERT}/LayerNorm_1/beta"),
    # ALBERT's one block, shared by every layer (Google's group 0, inner
    # layer 0; released ALBERTs have no other).
    "Transformer-MultiHeadSelfAttention/query_dense/kernel": Source(f"{_ALBERT}/attention_1/self/query/kernel"),
    "Transformer-MultiHeadSelfAttention/query_dense/bias": Source(f"{_ALBERT}/attention_1/self/query/bias"),
    "Transformer-MultiHeadSelfAttention/key_dense/kernel": Source(f"{_ALBERT}/attention_1/self/key/kernel"),
    "Transformer-MultiHeadSelfAttention/key_dense/bias": Source(f"{_ALBERT}/attention_1/self/key/bias"),
    "Transformer-MultiHeadSelfAttention/value_dense/kernel": Source(f"{_ALBERT}/attention_1/self/value/kernel"),
    "Transformer-MultiHeadSelfAttention/value_dense/bias": Source(f"{_ALBERT}/attention_1/self/value/bias"),
    "Transformer-MultiHeadSelfAttention/output_dense/kernel": Source(f"{_ALBERT}/attention_1/output/dense/kernel"),
    "Transformer-MultiHeadSelfAttention/output_dense/bias": Source(f"{_ALBERT}/attention_1/output/dense/bias"),
    "Transformer-MultiHeadSelfAttention-Norm/gamma": Source(f"{_ALBERT}/LayerNorm/gamma"),
    "Transformer-MultiHeadSelfAttention-Norm/beta": Source(f"{_ALBERT}/LayerNorm/beta"),
    "Transformer-FeedForward/intermediate_dense/kernel": Source(f"{_ALBERT}/ffn_1/intermediate/dense/kernel"),
    "Transformer-FeedForward/intermediate_dense/bias": Source(f"{_ALBERT}/ffn_1/intermediate/dense/bias"),
    "Transformer-FeedForward/output_dense/kernel": Source(f"{_ALBERT}/ffn_1/intermediate/output/dense/kernel"),
    "Transformer-FeedForward/output_dense/bias": Source(f"{_ALBERT}/ffn_1/intermediate/output/dense/bias"),
    "Transformer-FeedForward-Norm/gamma": Source(f"{_ALBERT}/LayerNorm_1/gamma"),
    "Transformer-FeedForward-Norm/beta": Source(f"{_ALBERT}/LayerNorm_1/beta"),
    "Pooler-Dense/kernel": Source("bert/pooler/dense/kernel"),
    "Pooler-Dense/bias": Source("bert/pooler/dense/bias"),
    "NSP/kernel": Source("cls/seq_relationship/output_weights", transpose=True),
    "NSP/bias": Source("cls/seq_relationship/output_bias"),
    "MLM-Dense/kernel": Source("cls/predictions/transform/dense/kernel"),
    "MLM-Dense/bias": Source("cls/predictions/transform/dense/bias"),
    "MLM-Norm/gamma": Source("cls/predictions/transform/LayerNorm/gamma"),
    "MLM-Norm/beta": Source("cls/predictions/transform/LayerNorm/beta"),
    "MLM-Bias/bias": Source("cls/predictions/output_bias"),
}

# Stored alongside the weights by training, never model variables.
IGNORED = ("global_step", "/adam_m", "/adam_v", "good_steps", "loss_scale")

# Google's release ties the masked-LM decoder and stores no copies.
DUPLICATES = {}


def candidates(name):
    """Google's checkpoints spell every name one way."""
    return (name,)
