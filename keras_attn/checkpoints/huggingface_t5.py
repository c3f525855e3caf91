"""Name table: Hugging Face T5 and mT5 weights (`T5ForConditionalGeneration`,
`MT5ForConditionalGeneration`, `T5EncoderModel`) onto this library's
variables. `torch.nn.Linear` stores kernels `(out, in)`, hence the
transposes; the relative position biases are `(buckets, heads)` as here.
"""

from keras_attn.checkpoints.source import Source


def _attention(layer, stack, index, module):
    prefix = f"{stack}.block.{{layer}}.layer.{index}.{module}"
    return {
        f"{layer}/{projection}_dense/kernel": Source(f"{prefix}.{short}.weight", transpose=True)
        for projection, short in (("query", "q"), ("key", "k"), ("value", "v"), ("output", "o"))
    } | {f"{layer}-Norm/scale": Source(f"{stack}.block.{{layer}}.layer.{index}.layer_norm.weight")}


def _feed_forward(layer, stack, index):
    prefix = f"{stack}.block.{{layer}}.layer.{index}"
    dense = f"{prefix}.DenseReluDense"
    return {
        # `wi` (ReLU) or the gated `wi_0` (activation) and `wi_1` (linear).
        f"{layer}/intermediate_dense/kernel": Source(f"{dense}.wi.weight", f"{dense}.wi_0.weight", transpose=True),
        f"{layer}/gate_dense/kernel": Source(f"{dense}.wi_1.weight", transpose=True),
        f"{layer}/output_dense/kernel": Source(f"{dense}.wo.weight", transpose=True),
        f"{layer}-Norm/scale": Source(f"{prefix}.layer_norm.weight"),
    }


TABLE = {
    "Embedding-Token/embeddings": Source("shared.weight", "encoder.embed_tokens.weight"),
    "Encoder-Embedding-Relative-Position/embeddings": Source(
        "encoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight"
    ),
    "Decoder-Embedding-Relative-Position/embeddings": Source(
        "decoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight"
    ),
    **_attention("Encoder-Transformer-{layer}-MultiHeadSelfAttention", "encoder", 0, "SelfAttention"),
    **_feed_forward("Encoder-Transformer-{layer}-FeedForward", "encoder", 1),
    "Encoder-Output-Norm/scale": Source("encoder.final_layer_norm.weight"),
    **_attention("Decoder-Transformer-{layer}-MultiHeadSelfAttention", "decoder", 0, "SelfAttention"),
    **_attention("Decoder-Transformer-{layer}-MultiHeadCrossAttention", "decoder", 1, "EncDecAttention"),
    **_feed_forward("Decoder-Transformer-{layer}-FeedForward", "decoder", 2),
    "Decoder-Output-Norm/scale": Source("decoder.final_layer_norm.weight"),
    # transformers 5 ties v1.1's head to the embedding and stores only it.
    "Decoder-Output-LM/kernel": Source("lm_head.weight", "shared.weight", transpose=True),
}

IGNORED = ()

# The stacks' embeddings are the shared one; v1.0's head is tied to it.
DUPLICATES = {
    "encoder.embed_tokens.weight": "shared.weight",
    "decoder.embed_tokens.weight": "shared.weight",
    "lm_head.weight": "shared.weight",
}

# Parts a model may be built without (`"t5_encoder"`): their weights are
# not reported unused.
OPTIONAL_PARTS = ("Decoder-",)


def candidates(name):
    return (name,)
