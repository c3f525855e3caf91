"""Name table: T5 and mT5 Mesh TensorFlow checkpoints, by the names
bert4keras reads (its `T5_Base.variable_mapping`), onto this library's
variables.

Kernels are stored `(in, out)` as in Keras; the relative position biases
`(heads, buckets)`, hence their transposes. mT5 spells the norms `rms_norm`
where T5 spells them `layer_norm`; both are accepted.
"""

from keras_attn import layer_names as names
from keras_attn.checkpoints import huggingface_t5
from keras_attn.checkpoints.name_table import NameTable
from keras_attn.checkpoints.source import Source

# What follows a stored weight's path, by its first part.
_SUFFIXES = {"layer_norm": "/scale", "DenseReluDense": "/kernel"}


def _stored(stack, index, *path):
    return (
        f"{stack}/block_{{layer:03d}}/layer_{index:03d}/" + "/".join(path)
        + _SUFFIXES.get(path[0], "")
    )


def _final_norm(stack):
    return Source(f"{stack}/final_layer_norm/scale", f"{stack}/rms_norm/scale")


def _relative(stack):
    return Source(
        f"{stack}/block_000/layer_000/SelfAttention/relative_attention_bias", transpose=True
    )


def candidates(name):
    """mT5's `rms_norm` spellings besides T5's `layer_norm`."""
    yield name
    if "layer_norm" in name:
        yield name.replace("layer_norm", "rms_norm")


NAME_TABLE = NameTable(
    entries={
        f"{names.EMBEDDING_TOKEN}/embeddings": Source("shared/embedding"),
        f"{names.relative_position(names.ENCODER)}/embeddings": _relative("encoder"),
        f"{names.relative_position(names.DECODER)}/embeddings": _relative("decoder"),
        **huggingface_t5.blocks(_stored, transpose=False),
        f"{names.in_stack(names.OUTPUT_NORM, names.ENCODER)}/scale": _final_norm("encoder"),
        f"{names.in_stack(names.OUTPUT_NORM, names.DECODER)}/scale": _final_norm("decoder"),
        f"{names.DECODER_OUTPUT_LM}/kernel": Source("decoder/logits/kernel"),
    },
    spellings=candidates,
    # Optimizer slots and training state.
    ignored=("global_step", "_slot_", "/adafactor", "/adam"),
    optional_parts=huggingface_t5.OPTIONAL_PARTS,
)
