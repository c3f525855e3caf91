"""Name table: T5 and mT5 Mesh TensorFlow checkpoints, by the names
bert4keras reads (its `T5_Base.variable_mapping`), onto this library's
variables.

Kernels are stored `(in, out)` as in Keras; the relative position biases
`(heads, buckets)`, hence their transposes. mT5 spells the norms `rms_norm`
where T5 spells them `layer_norm`; both are accepted.
"""

from keras_attn.checkpoints.source import Source


def _attention(layer, stack, index, module):
    prefix = f"{stack}/block_{{layer:03d}}/layer_{index:03d}"
    return {
        f"{layer}/{projection}_dense/kernel": Source(f"{prefix}/{module}/{short}")
        for projection, short in (("query", "q"), ("key", "k"), ("value", "v"), ("output", "o"))
    } | {f"{layer}-Norm/scale": Source(f"{prefix}/layer_norm/scale")}


def _feed_forward(layer, stack, index):
    prefix = f"{stack}/block_{{layer:03d}}/layer_{index:03d}"
    dense = f"{prefix}/DenseReluDense"
    return {
        f"{layer}/intermediate_dense/kernel": Source(f"{dense}/wi/kernel", f"{dense}/wi_0/kernel"),
        f"{layer}/gate_dense/kernel": Source(f"{dense}/wi_1/kernel"),
        f"{layer}/output_dense/kernel": Source(f"{dense}/wo/kernel"),
        f"{layer}-Norm/scale": Source(f"{prefix}/layer_norm/scale"),
    }


TABLE = {
    "Embedding-Token/embeddings": Source("shared/embedding"),
    "Encoder-Embedding-Relative-Position/embeddings": Source(
        "encoder/block_000/layer_000/SelfAttention/relative_attention_bias", transpose=True
    ),
    "Decoder-Embedding-Relative-Position/embeddings": Source(
        "decoder/block_000/layer_000/SelfAttention/relative_attention_bias", transpose=True
    ),
    **_attention("Encoder-Transformer-{layer}-MultiHeadSelfAttention", "encoder", 0, "SelfAttention"),
    **_feed_forward("Encoder-Transformer-{layer}-FeedForward", "encoder", 1),
    "Encoder-Output-Norm/scale": Source("encoder/final_layer_norm/scale", "encoder/rms_norm/scale"),
    **_attention("Decoder-Transformer-{layer}-MultiHeadSelfAttention", "decoder", 0, "SelfAttention"),
    **_attention("Decoder-Transformer-{layer}-MultiHeadCrossAttention", "decoder", 1, "EncDecAttention"),
    **_feed_forward("Decoder-Transformer-{layer}-FeedForward", "decoder", 2),
    "Decoder-Output-Norm/scale": Source("decoder/final_layer_norm/scale", "decoder/rms_norm/scale"),
    "Decoder-Output-LM/kernel": Source("decoder/logits/kernel"),
}

# Optimizer slots and training state.
IGNORED = ("global_step", "_slot_", "/adafactor", "/adam")

DUPLICATES = {}

OPTIONAL_PARTS = ("Decoder-",)


def candidates(name):
    """mT5's `rms_norm` spellings besides T5's `layer_norm`."""
    yield name
    if "layer_norm" in name:
        yield name.replace("layer_norm", "rms_norm")
