"""Name table: Hugging Face GPT-2 weights (`GPT2Model`, `GPT2LMHeadModel`)
onto this library's variables.

GPT-2's `Conv1D` layers store kernels `(in, out)`, as Keras does, so nothing
is transposed; `c_attn` holds the query, key and value projections side by
side, `(hidden, 3 * hidden)`, read here as three `part`s.
"""

from keras_attn import layer_names as names
from keras_attn.checkpoints.name_table import NameTable
from keras_attn.checkpoints.name_table import under
from keras_attn.checkpoints.source import Source
from keras_attn.checkpoints.source import dense
from keras_attn.checkpoints.source import fused
from keras_attn.checkpoints.source import torch_layer_norm

_BLOCK = "h.{layer}"
_ATTENTION = names.attention("{layer}")
_FEED_FORWARD = names.feed_forward("{layer}")


def _conv1d(layer, stored, part=None):
    """The entries of a Keras `Dense` stored as GPT-2's `Conv1D` `stored`."""
    return dense(layer, f"{stored}.weight", f"{stored}.bias", part=part)


NAME_TABLE = NameTable(
    entries={
        f"{names.EMBEDDING_TOKEN}/embeddings": Source("wte.weight"),
        f"{names.EMBEDDING_POSITION}/embeddings": Source("wpe.weight"),
        **torch_layer_norm(names.norm(_ATTENTION), f"{_BLOCK}.ln_1"),
        **fused(
            (f"{_ATTENTION}/{projection}_dense" for projection in ("query", "key", "value")),
            f"{_BLOCK}.attn.c_attn",
            _conv1d,
        ),
        **_conv1d(f"{_ATTENTION}/output_dense", f"{_BLOCK}.attn.c_proj"),
        **torch_layer_norm(names.norm(_FEED_FORWARD), f"{_BLOCK}.ln_2"),
        **_conv1d(f"{_FEED_FORWARD}/intermediate_dense", f"{_BLOCK}.mlp.c_fc"),
        **_conv1d(f"{_FEED_FORWARD}/output_dense", f"{_BLOCK}.mlp.c_proj"),
        **torch_layer_norm(names.OUTPUT_NORM, "ln_f"),
        # An untied head (`tie_word_embeddings: false`), stored `(vocab,
        # hidden)` as a torch `Linear`.
        f"{names.MLM_DECODER}/kernel": Source("lm_head.weight", transpose=True),
    },
    # Bare (`GPT2Model`) or under `transformer.` (`GPT2LMHeadModel`).
    spellings=under("transformer."),
    # Older files store the causal mask as buffers.
    ignored=(".attn.bias", ".attn.masked_bias"),
    # A tied language-model head is the token embedding.
    duplicates={"lm_head.weight": "wte.weight"},
)
