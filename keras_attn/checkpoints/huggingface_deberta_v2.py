"""Name table: Hugging Face DeBERTa v2/v3 weights (`model_type: deberta-v2`:
`DebertaV2Model`, `DebertaV2ForMaskedLM`,
`DebertaV2ForSequenceClassification`, safetensors or PyTorch) onto this
library's variables.

BERT's layout under other names: per block `attention.self.query_proj`,
`key_proj`, `value_proj` (and, without `share_att_key`, `pos_key_proj` and
`pos_query_proj`, which project the relative embeddings), then
`attention.output`, `intermediate` and `output` as BERT's; the shared
`encoder.rel_embeddings` and their `encoder.LayerNorm`; the task models'
weights under `deberta.`, the masked-LM head as `cls.predictions` (the
legacy head) or `lm_predictions.lm_head`, the sequence classifier's
`pooler.dense` (`ContextPooler`). `torch.nn.Linear` stores kernels
`(out, in)`, hence the transposes.
"""

from keras_attn.checkpoints.source import Source, torch_layer_norm, torch_linear

_LAYER = "encoder.layer.{layer}"
_ATTENTION = "Transformer-{layer}-MultiHeadSelfAttention"
_FEED_FORWARD = "Transformer-{layer}-FeedForward"


TABLE = {
    "Embedding-Token/embeddings": Source("embeddings.word_embeddings.weight"),
    "Embedding-Segment/embeddings": Source("embeddings.token_type_embeddings.weight"),
    "Embedding-Position/embeddings": Source("embeddings.position_embeddings.weight"),
    **torch_layer_norm("Embedding-Norm", "embeddings.LayerNorm"),
    "Relative-Embedding/embeddings": Source("encoder.rel_embeddings.weight"),
    **torch_layer_norm("Relative-Embedding/norm", "encoder.LayerNorm"),
    **torch_linear(f"{_ATTENTION}/query_dense", f"{_LAYER}.attention.self.query_proj"),
    **torch_linear(f"{_ATTENTION}/key_dense", f"{_LAYER}.attention.self.key_proj"),
    **torch_linear(f"{_ATTENTION}/value_dense", f"{_LAYER}.attention.self.value_proj"),
    **torch_linear(f"{_ATTENTION}/position_key_dense", f"{_LAYER}.attention.self.pos_key_proj"),
    **torch_linear(
        f"{_ATTENTION}/position_query_dense", f"{_LAYER}.attention.self.pos_query_proj"
    ),
    **torch_linear(f"{_ATTENTION}/output_dense", f"{_LAYER}.attention.output.dense"),
    **torch_layer_norm(f"{_ATTENTION}-Norm", f"{_LAYER}.attention.output.LayerNorm"),
    **torch_linear(f"{_FEED_FORWARD}/intermediate_dense", f"{_LAYER}.intermediate.dense"),
    **torch_linear(f"{_FEED_FORWARD}/output_dense", f"{_LAYER}.output.dense"),
    **torch_layer_norm(f"{_FEED_FORWARD}-Norm", f"{_LAYER}.output.LayerNorm"),
    # `DebertaV2ForSequenceClassification`'s `ContextPooler`.
    **torch_linear("Pooler-Dense", "pooler.dense"),
    # `DebertaV2ForMaskedLM`'s head, legacy (`cls.predictions`) or not
    # (`lm_predictions.lm_head`); the decoder is the token embedding.
    "MLM-Dense/kernel": Source(
        "cls.predictions.transform.dense.weight", "lm_predictions.lm_head.dense.weight",
        transpose=True,
    ),
    "MLM-Dense/bias": Source(
        "cls.predictions.transform.dense.bias", "lm_predictions.lm_head.dense.bias"
    ),
    "MLM-Norm/gamma": Source(
        "cls.predictions.transform.LayerNorm.weight", "lm_predictions.lm_head.LayerNorm.weight"
    ),
    "MLM-Norm/beta": Source(
        "cls.predictions.transform.LayerNorm.bias", "lm_predictions.lm_head.LayerNorm.bias"
    ),
    # safetensors stores one of the tied pair `decoder.bias` / `bias`.
    "MLM-Bias/bias": Source(
        "cls.predictions.decoder.bias", "cls.predictions.bias", "lm_predictions.lm_head.bias"
    ),
}

# Position ids are a buffer; `mask_predictions` is the replaced-token
# detection head some checkpoints keep, which transformers drops too.
IGNORED = ("embeddings.position_ids", "mask_predictions.")

# A tied decoder is the token embedding.
DUPLICATES = {"cls.predictions.decoder.weight": "embeddings.word_embeddings.weight"}


def candidates(name):
    """Bare (`DebertaV2Model`) or under `deberta.` (the task models); the
    heads are stored at the top."""
    if name.startswith(("cls.", "lm_predictions.", "pooler.")):
        return (name,)
    return (name, f"deberta.{name}")
