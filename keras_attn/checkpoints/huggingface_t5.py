"""Name table: Hugging Face T5 and mT5 weights (`T5ForConditionalGeneration`,
`MT5ForConditionalGeneration`, `T5EncoderModel`) onto this library's
variables. `torch.nn.Linear` stores kernels `(out, in)`, hence the
transposes; the relative position biases are `(buckets, heads)` as here.
"""

from keras_attn import layer_names as names
from keras_attn.checkpoints.name_table import NameTable
from keras_attn.checkpoints.source import Source


def blocks(stored, transpose):
    """The entries of T5's encoder and decoder blocks, in either format:
    `stored(stack, index, *path)` is where a format stores the weight at
    `path` of sub-layer `index` of a block of `stack` (`"encoder"`,
    `"decoder"`; `index` 0 the self-attention, then the decoder's
    cross-attention, then the feed-forward; `path` `("SelfAttention",
    "q")`, `("layer_norm",)`, `("DenseReluDense", "wi")`), `{layer}` for
    the block; `transpose`: whether kernels are stored `(out, in)`."""
    entries = {}
    for stack, modules in ((names.ENCODER, ("SelfAttention",)),
                           (names.DECODER, ("SelfAttention", "EncDecAttention"))):
        where = stack.lower()
        for index, module in enumerate(modules):
            layer = (names.cross_attention if index else names.attention)("{layer}", stack)
            for projection in ("query", "key", "value", "output"):
                entries[f"{layer}/{projection}_dense/kernel"] = Source(
                    stored(where, index, module, projection[0]), transpose=transpose
                )
            entries[f"{names.norm(layer)}/scale"] = Source(stored(where, index, "layer_norm"))
        layer, index = names.feed_forward("{layer}", stack), len(modules)
        entries.update({
            # `wi` (ReLU) or the gated `wi_0` (activation) and `wi_1` (linear).
            f"{layer}/intermediate_dense/kernel": Source(
                stored(where, index, "DenseReluDense", "wi"),
                stored(where, index, "DenseReluDense", "wi_0"),
                transpose=transpose,
            ),
            f"{layer}/gate_dense/kernel": Source(
                stored(where, index, "DenseReluDense", "wi_1"), transpose=transpose
            ),
            f"{layer}/output_dense/kernel": Source(
                stored(where, index, "DenseReluDense", "wo"), transpose=transpose
            ),
            f"{names.norm(layer)}/scale": Source(stored(where, index, "layer_norm")),
        })
    return entries


def _stored(stack, index, *path):
    return f"{stack}.block.{{layer}}.layer.{index}." + ".".join(path) + ".weight"


# The relative position bias table of each stack, stored in its first block.
_RELATIVE = "block.0.layer.0.SelfAttention.relative_attention_bias.weight"

# Parts a model may be built without (`"t5_encoder"`): their weights are
# not reported unused.
OPTIONAL_PARTS = (f"{names.DECODER}-",)

NAME_TABLE = NameTable(
    entries={
        f"{names.EMBEDDING_TOKEN}/embeddings": Source("shared.weight", "encoder.embed_tokens.weight"),
        f"{names.relative_position(names.ENCODER)}/embeddings": Source(f"encoder.{_RELATIVE}"),
        f"{names.relative_position(names.DECODER)}/embeddings": Source(f"decoder.{_RELATIVE}"),
        **blocks(_stored, transpose=True),
        f"{names.in_stack(names.OUTPUT_NORM, names.ENCODER)}/scale": Source(
            "encoder.final_layer_norm.weight"
        ),
        f"{names.in_stack(names.OUTPUT_NORM, names.DECODER)}/scale": Source(
            "decoder.final_layer_norm.weight"
        ),
        # transformers 5 ties v1.1's head to the embedding and stores only it.
        f"{names.DECODER_OUTPUT_LM}/kernel": Source(
            "lm_head.weight", "shared.weight", transpose=True
        ),
    },
    # The stacks' embeddings are the shared one; v1.0's head is tied to it.
    duplicates={
        "encoder.embed_tokens.weight": "shared.weight",
        "decoder.embed_tokens.weight": "shared.weight",
        "lm_head.weight": "shared.weight",
    },
    optional_parts=OPTIONAL_PARTS,
)
