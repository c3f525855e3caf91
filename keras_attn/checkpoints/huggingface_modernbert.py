"""Name table: Hugging Face ModernBERT weights (`model_type: modernbert`,
`ModernBertModel` and `ModernBertForMaskedLM`, safetensors or PyTorch) onto
this library's variables.

`embeddings.tok_embeddings` and its `norm`, per block `attn_norm` (none in
block 0), `attn.Wqkv`, `attn.Wo`, `mlp_norm`, `mlp.Wi`, `mlp.Wo`, then
`final_norm`; the masked-LM head's `head.dense`, `head.norm` and `decoder`.
`torch.nn.Linear` stores kernels `(out, in)`, hence the transposes. `Wqkv`
holds the query, key and value projections one after another along its
output, read as three `part`s; `Wi` holds the gated feed-forward's two
halves, the activated one (`intermediate_dense`) first, then the linear one
(`gate_dense`): transformers computes `act(input) * gate` of
`input, gate = Wi(x).chunk(2)`. Norm biases exist where the config has
`norm_bias: true`, projection biases with `attention_bias`/`mlp_bias`.
"""

from keras_attn import layer_names as names
from keras_attn.checkpoints.name_table import NameTable
from keras_attn.checkpoints.name_table import under
from keras_attn.checkpoints.source import Source
from keras_attn.checkpoints.source import fused
from keras_attn.checkpoints.source import torch_layer_norm
from keras_attn.checkpoints.source import torch_linear

_BLOCK = "layers.{layer}"
_ATTENTION = names.attention("{layer}")
_FEED_FORWARD = names.feed_forward("{layer}")
_QKV = tuple(f"{_ATTENTION}/{name}_dense" for name in ("query", "key", "value"))
# The gated feed-forward's activated branch, then its linear one.
_GATED = (f"{_FEED_FORWARD}/intermediate_dense", f"{_FEED_FORWARD}/gate_dense")

NAME_TABLE = NameTable(
    entries={
        f"{names.EMBEDDING_TOKEN}/embeddings": Source("embeddings.tok_embeddings.weight"),
        **torch_layer_norm(names.EMBEDDING_NORM, "embeddings.norm"),
        **torch_layer_norm(names.norm(_ATTENTION), f"{_BLOCK}.attn_norm"),
        **fused(_QKV, f"{_BLOCK}.attn.Wqkv", torch_linear),
        **torch_linear(f"{_ATTENTION}/output_dense", f"{_BLOCK}.attn.Wo"),
        **torch_layer_norm(names.norm(_FEED_FORWARD), f"{_BLOCK}.mlp_norm"),
        **fused(_GATED, f"{_BLOCK}.mlp.Wi", torch_linear),
        **torch_linear(f"{_FEED_FORWARD}/output_dense", f"{_BLOCK}.mlp.Wo"),
        **torch_layer_norm(names.OUTPUT_NORM, "final_norm"),
        # `ModernBertForMaskedLM`'s head.
        **torch_linear(names.MLM_DENSE, "head.dense"),
        **torch_layer_norm(names.MLM_NORM, "head.norm"),
        f"{names.MLM_BIAS}/bias": Source("decoder.bias"),
        # An untied decoder (`tie_word_embeddings: false`), `(vocab, hidden)`.
        f"{names.MLM_DECODER}/kernel": Source("decoder.weight", transpose=True),
    },
    # Bare (`ModernBertModel`) or under `model.` (`ModernBertForMaskedLM`);
    # the head and the decoder are stored at the top.
    spellings=under("model.", "head.", "decoder."),
    # A tied decoder is the token embedding.
    duplicates={"decoder.weight": "embeddings.tok_embeddings.weight"},
)
