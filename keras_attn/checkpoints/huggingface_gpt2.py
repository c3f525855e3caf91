"""Name table: Hugging Face GPT-2 weights (`GPT2Model`, `GPT2LMHeadModel`)
onto this library's variables.

GPT-2's `Conv1D` layers store kernels `(in, out)`, as Keras does, so nothing
is transposed; `c_attn` holds the query, key and value projections side by
side, `(hidden, 3 * hidden)`, read here as three `part`s.
"""

from keras_attn.checkpoints.source import Source

_BLOCK = "h.{layer}"
_ATTENTION = "Transformer-{layer}-MultiHeadSelfAttention"
_FEED_FORWARD = "Transformer-{layer}-FeedForward"

TABLE = {
    "Embedding-Token/embeddings": Source("wte.weight"),
    "Embedding-Position/embeddings": Source("wpe.weight"),
    f"{_ATTENTION}-Norm/gamma": Source(f"{_BLOCK}.ln_1.weight"),
    f"{_ATTENTION}-Norm/beta": Source(f"{_BLOCK}.ln_1.bias"),
    f"{_ATTENTION}/query_dense/kernel": Source(f"{_BLOCK}.attn.c_attn.weight", part=(0, 3)),
    f"{_ATTENTION}/query_dense/bias": Source(f"{_BLOCK}.attn.c_attn.bias", part=(0, 3)),
    f"{_ATTENTION}/key_dense/kernel": Source(f"{_BLOCK}.attn.c_attn.weight", part=(1, 3)),
    f"{_ATTENTION}/key_dense/bias": Source(f"{_BLOCK}.attn.c_attn.bias", part=(1, 3)),
    f"{_ATTENTION}/value_dense/kernel": Source(f"{_BLOCK}.attn.c_attn.weight", part=(2, 3)),
    f"{_ATTENTION}/value_dense/bias": Source(f"{_BLOCK}.attn.c_attn.bias", part=(2, 3)),
    f"{_ATTENTION}/output_dense/kernel": Source(f"{_BLOCK}.attn.c_proj.weight"),
    f"{_ATTENTION}/output_dense/bias": Source(f"{_BLOCK}.attn.c_proj.bias"),
    f"{_FEED_FORWARD}-Norm/gamma": Source(f"{_BLOCK}.ln_2.weight"),
    f"{_FEED_FORWARD}-Norm/beta": Source(f"{_BLOCK}.ln_2.bias"),
    f"{_FEED_FORWARD}/intermediate_dense/kernel": Source(f"{_BLOCK}.mlp.c_fc.weight"),
    f"{_FEED_FORWARD}/intermediate_dense/bias": Source(f"{_BLOCK}.mlp.c_fc.bias"),
    f"{_FEED_FORWARD}/output_dense/kernel": Source(f"{_BLOCK}.mlp.c_proj.weight"),
    f"{_FEED_FORWARD}/output_dense/bias": Source(f"{_BLOCK}.mlp.c_proj.bias"),
    "Output-Norm/gamma": Source("ln_f.weight"),
    "Output-Norm/beta": Source("ln_f.bias"),
    # An untied head (`tie_word_embeddings: false`), stored `(vocab, hidden)`
    # as a torch `Linear`.
    "MLM-Decoder/kernel": Source("lm_head.weight", transpose=True),
}

# Older files store the causal mask as buffers.
IGNORED = (".attn.bias", ".attn.masked_bias")

# A tied language-model head is the token embedding.
DUPLICATES = {"lm_head.weight": "wte.weight"}


def candidates(name):
    """Bare (`GPT2Model`) or under `transformer.` (`GPT2LMHeadModel`)."""
    return (name, f"transformer.{name}")
