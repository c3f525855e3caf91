"""Name table: Hugging Face BERT, RoBERTa, ALBERT and ELECTRA weights
(safetensors or PyTorch) onto this library's variables.

Keys are Keras variable paths (`{layer}` stands for the block index); values
list the accepted checkpoint names, tried in order, each also with the
`bert.`, `roberta.`, `albert.` and `electra.` prefixes of the task models
(`BertForPreTraining`, `RobertaForMaskedLM`, `AlbertForMaskedLM`,
`ElectraForPreTraining`) and with the older `LayerNorm.gamma`/`.beta`
spellings. A block of its own per layer (`Transformer-{layer}-...`) reads
BERT's `encoder.layer.{layer}`, or else ALBERT's one shared block (the
`albert_unshared` variant: each layer starts from a copy).
`torch.nn.Linear` stores kernels as `(out, in)`, hence the transposes. Weights no checkpoint holds are declared by their layers
(`checkpoint_free_weights`), not listed here.
"""

from keras_attn.checkpoints.source import Source

_LAYER = "encoder.layer.{layer}"
_ALBERT = "encoder.albert_layer_groups.0.albert_layers.0"

TABLE = {
    "Embedding-Token/embeddings": Source("embeddings.word_embeddings.weight"),
    "Embedding-Segment/embeddings": Source("embeddings.token_type_embeddings.weight"),
    "Embedding-Position/embeddings": Source("embeddings.position_embeddings.weight"),
    "Embedding-Norm/gamma": Source("embeddings.LayerNorm.weight"),
    "Embedding-Norm/beta": Source("embeddings.LayerNorm.bias"),
    "Transformer-{layer}-MultiHeadSelfAttention/query_dense/kernel": Source(f"{_LAYER}.attention.self.query.weight", f"{_ALBERT}.attention.query.weight", transpose=True),
    "Transformer-{layer}-MultiHeadSelfAttention/query_dense/bias": Source(f"{_LAYER}.attention.self.query.bias", f"{_ALBERT}.attention.query.bias"),
    "Transformer-{layer}-MultiHeadSelfAttention/key_dense/kernel": Source(f"{_LAYER}.attention.self.key.weight", f"{_ALBERT}.attention.key.weight", transpose=True),
    "Transformer-{layer}-MultiHeadSelfAttention/key_dense/bias": Source(f"{_LAYER}.attention.self.key.bias", f"{_ALBERT}.attention.key.bias"),
    "Transformer-{layer}-MultiHeadSelfAttention/value_dense/kernel": Source(f"{_LAYER}.attention.self.value.weight", f"{_ALBERT}.attention.value.weight", transpose=True),
    "Transformer-{layer}-MultiHeadSelfAttention/value_dense/bias": Source(f"{_LAYER}.attention.self.value.bias", f"{_ALBERT}.attention.value.bias"),
    "Transformer-{layer}-MultiHeadSelfAttention/output_dense/kernel": Source(f"{_LAYER}.attention.output.dense.weight", f"{_ALBERT}.attention.dense.weight", transpose=True),
    "Transformer-{layer}-MultiHeadSelfAttention/output_dense/bias": Source(f"{_LAYER}.attention.output.dense.bias", f"{_ALBERT}.attention.dense.bias"),
    "Transformer-{layer}-MultiHeadSelfAttention-Norm/gamma": Source(f"{_LAYER}.attention.output.LayerNorm.weight", f"{_ALBERT}.attention.LayerNorm.weight"),
    "Transformer-{layer}-MultiHeadSelfAttention-Norm/beta": Source(f"{_LAYER}.attention.output.LayerNorm.bias", f"{_ALBERT}.attention.LayerNorm.bias"),
    "Transformer-{layer}-FeedForward/intermediate_dense/kernel": Source(f"{_LAYER}.intermediate.dense.weight", f"{_ALBERT}.ffn.weight", transpose=True),
    "Transformer-{layer}-FeedForward/intermediate_dense/bias": Source(f"{_LAYER}.intermediate.dense.bias", f"{_ALBERT}.ffn.bias"),
    "Transformer-{layer}-FeedForward/output_dense/kernel": Source(f"{_LAYER}.output.dense.weight", f"{_ALBERT}.ffn_output.weight", transpose=True),
    "Transformer-{layer}-FeedForward/output_dense/bias": Source(f"{_LAYER}.output.dense.bias", f"{_ALBERT}.ffn_output.bias"),
    "Transformer-{layer}-FeedForward-Norm/gamma": Source(f"{_LAYER}.output.LayerNorm.weight", f"{_ALBERT}.full_layer_layer_norm.weight"),
    "Transformer-{layer}-FeedForward-Norm/beta": Source(f"{_LAYER}.output.LayerNorm.bias", f"{_ALBERT}.full_layer_layer_norm.bias"),
    # ALBERT's and ELECTRA's factorised embeddings, then ALBERT's one block,
    # shared by every layer.
    "Embedding-Mapping/kernel": Source(
        "encoder.embedding_hidden_mapping_in.weight", "embeddings_project.weight", transpose=True
    ),
    "Embedding-Mapping/bias": Source("encoder.embedding_hidden_mapping_in.bias", "embeddings_project.bias"),
    "Transformer-MultiHeadSelfAttention/query_dense/kernel": Source(f"{_ALBERT}.attention.query.weight", transpose=True),
    "Transformer-MultiHeadSelfAttention/query_dense/bias": Source(f"{_ALBERT}.attention.query.bias"),
    "Transformer-MultiHeadSelfAttention/key_dense/kernel": Source(f"{_ALBERT}.attention.key.weight", transpose=True),
    "Transformer-MultiHeadSelfAttention/key_dense/bias": Source(f"{_ALBERT}.attention.key.bias"),
    "Transformer-MultiHeadSelfAttention/value_dense/kernel": Source(f"{_ALBERT}.attention.value.weight", transpose=True),
    "Transformer-MultiHeadSelfAttention/value_dense/bias": Source(f"{_ALBERT}.attention.value.bias"),
    "Transformer-MultiHeadSelfAttention/output_dense/kernel": Source(f"{_ALBERT}.attention.dense.weight", transpose=True),
    "Transformer-MultiHeadSelfAttention/output_dense/bias": Source(f"{_ALBERT}.attention.dense.bias"),
    "Transformer-MultiHeadSelfAttention-Norm/gamma": Source(f"{_ALBERT}.attention.LayerNorm.weight"),
    "Transformer-MultiHeadSelfAttention-Norm/beta": Source(f"{_ALBERT}.attention.LayerNorm.bias"),
    "Transformer-FeedForward/intermediate_dense/kernel": Source(f"{_ALBERT}.ffn.weight", transpose=True),
    "Transformer-FeedForward/intermediate_dense/bias": Source(f"{_ALBERT}.ffn.bias"),
    "Transformer-FeedForward/output_dense/kernel": Source(f"{_ALBERT}.ffn_output.weight", transpose=True),
    "Transformer-FeedForward/output_dense/bias": Source(f"{_ALBERT}.ffn_output.bias"),
    "Transformer-FeedForward-Norm/gamma": Source(f"{_ALBERT}.full_layer_layer_norm.weight"),
    "Transformer-FeedForward-Norm/beta": Source(f"{_ALBERT}.full_layer_layer_norm.bias"),
    "Pooler-Dense/kernel": Source("pooler.dense.weight", "pooler.weight", transpose=True),
    "Pooler-Dense/bias": Source("pooler.dense.bias", "pooler.bias"),
    # BERT's next-sentence or ALBERT's sentence-order head.
    "NSP/kernel": Source("cls.seq_relationship.weight", "sop_classifier.classifier.weight", transpose=True),
    "NSP/bias": Source("cls.seq_relationship.bias", "sop_classifier.classifier.bias"),
    # ELECTRA's discriminator head (`ElectraForPreTraining`).
    "Discriminator-Dense/kernel": Source("discriminator_predictions.dense.weight", transpose=True),
    "Discriminator-Dense/bias": Source("discriminator_predictions.dense.bias"),
    "Discriminator-Prediction/kernel": Source("discriminator_predictions.dense_prediction.weight", transpose=True),
    "Discriminator-Prediction/bias": Source("discriminator_predictions.dense_prediction.bias"),
    # BERT's, RoBERTa's, ALBERT's and ELECTRA's generator's masked-LM heads.
    "MLM-Dense/kernel": Source(
        "cls.predictions.transform.dense.weight", "lm_head.dense.weight", "predictions.dense.weight",
        "generator_predictions.dense.weight", transpose=True,
    ),
    "MLM-Dense/bias": Source(
        "cls.predictions.transform.dense.bias", "lm_head.dense.bias", "predictions.dense.bias",
        "generator_predictions.dense.bias",
    ),
    "MLM-Norm/gamma": Source(
        "cls.predictions.transform.LayerNorm.weight", "lm_head.layer_norm.weight", "predictions.LayerNorm.weight",
        "generator_predictions.LayerNorm.weight",
    ),
    "MLM-Norm/beta": Source(
        "cls.predictions.transform.LayerNorm.bias", "lm_head.layer_norm.bias", "predictions.LayerNorm.bias",
        "generator_predictions.LayerNorm.bias",
    ),
    # The decoder's bias is the one the logits use; `tie_word_embeddings: false`
    # unties it from `*.bias` too, and safetensors stores only one of a tied pair.
    "MLM-Bias/bias": Source(
        "cls.predictions.decoder.bias", "cls.predictions.bias", "lm_head.decoder.bias", "lm_head.bias",
        "predictions.decoder.bias", "predictions.bias", "generator_lm_head.bias",
    ),
    # Only in models with `tie_word_embeddings: false`.
    "MLM-Decoder/kernel": Source(
        "cls.predictions.decoder.weight", "lm_head.decoder.weight", "predictions.decoder.weight",
        "generator_lm_head.weight", transpose=True,
    ),
}

PREFIXES = ("", "bert.", "roberta.", "albert.", "electra.")

# Older checkpoints spell LayerNorm parameters as TensorFlow does.
SPELLINGS = ((".weight", ".gamma"), (".bias", ".beta"))

# Position ids are a buffer, never a variable.
IGNORED = ("embeddings.position_ids",)

# Stored by the task models as copies: a tied decoder is the token embedding.
# An unused copy is reported only when it differs from what it copies (an
# untied decoder loaded into a tied model).
DUPLICATES = {
    "cls.predictions.decoder.weight": "embeddings.word_embeddings.weight",
    "lm_head.decoder.weight": "embeddings.word_embeddings.weight",
    "predictions.decoder.weight": "embeddings.word_embeddings.weight",
    "generator_lm_head.weight": "embeddings.word_embeddings.weight",
}


def candidates(name):
    """Every spelling under which `name` may be stored."""
    for prefix in PREFIXES:
        yield prefix + name
        if "LayerNorm" in name:
            for modern, legacy in SPELLINGS:
                if name.endswith(modern):
                    yield prefix + name[: -len(modern)] + legacy
