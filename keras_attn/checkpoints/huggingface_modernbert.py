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

from keras_attn.checkpoints.source import Source, torch_layer_norm, torch_linear

_BLOCK = "layers.{layer}"
_ATTENTION = "Transformer-{layer}-MultiHeadSelfAttention"
_FEED_FORWARD = "Transformer-{layer}-FeedForward"


TABLE = {
    "Embedding-Token/embeddings": Source("embeddings.tok_embeddings.weight"),
    **torch_layer_norm("Embedding-Norm", "embeddings.norm"),
    **torch_layer_norm(f"{_ATTENTION}-Norm", f"{_BLOCK}.attn_norm"),
    **torch_linear(f"{_ATTENTION}/query_dense", f"{_BLOCK}.attn.Wqkv", part=(0, 3)),
    **torch_linear(f"{_ATTENTION}/key_dense", f"{_BLOCK}.attn.Wqkv", part=(1, 3)),
    **torch_linear(f"{_ATTENTION}/value_dense", f"{_BLOCK}.attn.Wqkv", part=(2, 3)),
    **torch_linear(f"{_ATTENTION}/output_dense", f"{_BLOCK}.attn.Wo"),
    **torch_layer_norm(f"{_FEED_FORWARD}-Norm", f"{_BLOCK}.mlp_norm"),
    **torch_linear(f"{_FEED_FORWARD}/intermediate_dense", f"{_BLOCK}.mlp.Wi", part=(0, 2)),
    **torch_linear(f"{_FEED_FORWARD}/gate_dense", f"{_BLOCK}.mlp.Wi", part=(1, 2)),
    **torch_linear(f"{_FEED_FORWARD}/output_dense", f"{_BLOCK}.mlp.Wo"),
    **torch_layer_norm("Output-Norm", "final_norm"),
    # `ModernBertForMaskedLM`'s head.
    **torch_linear("MLM-Dense", "head.dense"),
    **torch_layer_norm("MLM-Norm", "head.norm"),
    "MLM-Bias/bias": Source("decoder.bias"),
    # An untied decoder (`tie_word_embeddings: false`), `(vocab, hidden)`.
    "MLM-Decoder/kernel": Source("decoder.weight", transpose=True),
}

IGNORED = ()

# A tied decoder is the token embedding.
DUPLICATES = {"decoder.weight": "embeddings.tok_embeddings.weight"}


def candidates(name):
    """Bare (`ModernBertModel`) or under `model.` (`ModernBertForMaskedLM`);
    the head and the decoder are stored at the top."""
    if name.startswith(("head.", "decoder.")):
        return (name,)
    return (name, f"model.{name}")
