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

from keras_attn import layer_names as names
from keras_attn.checkpoints import huggingface_bert
from keras_attn.checkpoints.name_table import NameTable
from keras_attn.checkpoints.name_table import under
from keras_attn.checkpoints.source import Source
from keras_attn.checkpoints.source import merged
from keras_attn.checkpoints.source import torch_layer_norm
from keras_attn.checkpoints.source import torch_linear

_LAYER = "encoder.layer.{layer}"
_ATTENTION = names.attention("{layer}")
_FEED_FORWARD = names.feed_forward("{layer}")
# `DebertaV2ForMaskedLM`'s head, legacy (`cls.predictions`) or not
# (`lm_predictions.lm_head`); the decoder is the token embedding.
_HEADS = ("cls.predictions.transform", "lm_predictions.lm_head")

NAME_TABLE = NameTable(
    entries={
        **huggingface_bert.EMBEDDINGS,
        f"{names.RELATIVE_EMBEDDING}/embeddings": Source("encoder.rel_embeddings.weight"),
        **torch_layer_norm(f"{names.RELATIVE_EMBEDDING}/norm", "encoder.LayerNorm"),
        **merged(
            torch_linear(f"{_ATTENTION}/{projection}_dense", f"{_LAYER}.attention.self.{stored}")
            for projection, stored in (
                ("query", "query_proj"), ("key", "key_proj"), ("value", "value_proj"),
                ("position_key", "pos_key_proj"), ("position_query", "pos_query_proj"),
            )
        ),
        **torch_linear(f"{_ATTENTION}/output_dense", f"{_LAYER}.attention.output.dense"),
        **torch_layer_norm(names.norm(_ATTENTION), f"{_LAYER}.attention.output.LayerNorm"),
        **torch_linear(f"{_FEED_FORWARD}/intermediate_dense", f"{_LAYER}.intermediate.dense"),
        **torch_linear(f"{_FEED_FORWARD}/output_dense", f"{_LAYER}.output.dense"),
        **torch_layer_norm(names.norm(_FEED_FORWARD), f"{_LAYER}.output.LayerNorm"),
        # `DebertaV2ForSequenceClassification`'s `ContextPooler`.
        **torch_linear(names.POOLER, "pooler.dense"),
        f"{names.MLM_DENSE}/kernel": Source(
            *(f"{head}.dense.weight" for head in _HEADS), transpose=True
        ),
        f"{names.MLM_DENSE}/bias": Source(*(f"{head}.dense.bias" for head in _HEADS)),
        f"{names.MLM_NORM}/gamma": Source(
            "cls.predictions.transform.LayerNorm.weight", "lm_predictions.lm_head.LayerNorm.weight"
        ),
        f"{names.MLM_NORM}/beta": Source(
            "cls.predictions.transform.LayerNorm.bias", "lm_predictions.lm_head.LayerNorm.bias"
        ),
        # safetensors stores one of the tied pair `decoder.bias` / `bias`.
        f"{names.MLM_BIAS}/bias": Source(
            "cls.predictions.decoder.bias", "cls.predictions.bias", "lm_predictions.lm_head.bias"
        ),
    },
    # Bare (`DebertaV2Model`) or under `deberta.` (the task models); the
    # heads are stored at the top.
    spellings=under("deberta.", "cls.", "lm_predictions.", "pooler."),
    # Position ids are a buffer; `mask_predictions` is the replaced-token
    # detection head some checkpoints keep, which transformers drops too.
    ignored=("embeddings.position_ids", "mask_predictions."),
    # A tied decoder is the token embedding.
    duplicates={"cls.predictions.decoder.weight": "embeddings.word_embeddings.weight"},
)
