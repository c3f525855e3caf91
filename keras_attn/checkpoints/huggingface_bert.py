"""Name table: Hugging Face BERT, RoBERTa, ALBERT and ELECTRA weights
(safetensors or PyTorch) onto this library's variables.

Every name is also read with the `bert.`, `roberta.`, `albert.` and
`electra.` prefixes of the task models (`BertForPreTraining`,
`RobertaForMaskedLM`, `AlbertForMaskedLM`, `ElectraForPreTraining`) and
with the older `LayerNorm.gamma`/`.beta` spellings. A block of its own per
layer (`Transformer-{layer}-...`) reads BERT's `encoder.layer.{layer}`, or
else ALBERT's one shared block (the `albert_unshared` variant: each layer
starts from a copy). `torch.nn.Linear` stores kernels as `(out, in)`, hence
the transposes.
"""

from keras_attn import layer_names as names
from keras_attn.checkpoints.name_table import NameTable
from keras_attn.checkpoints.source import Source
from keras_attn.checkpoints.source import bert_block
from keras_attn.checkpoints.source import torch_layer_norm
from keras_attn.checkpoints.source import torch_linear
from keras_attn.checkpoints.source import under_scope

# Where a block's layers are stored, by role (see `source.block_layers`).
BERT_LAYER = under_scope("encoder.layer.{layer}", {
    "query": "attention.self.query",
    "key": "attention.self.key",
    "value": "attention.self.value",
    "attention_output": "attention.output.dense",
    "attention_norm": "attention.output.LayerNorm",
    "intermediate": "intermediate.dense",
    "output": "output.dense",
    "feed_forward_norm": "output.LayerNorm",
}, ".")
ALBERT_LAYER = under_scope("encoder.albert_layer_groups.0.albert_layers.0", {
    "query": "attention.query",
    "key": "attention.key",
    "value": "attention.value",
    "attention_output": "attention.dense",
    "attention_norm": "attention.LayerNorm",
    "intermediate": "ffn",
    "output": "ffn_output",
    "feed_forward_norm": "full_layer_layer_norm",
}, ".")


def _heads(layer, weight, *stored, transpose=False):
    """The entry of `layer`'s `weight`, stored as `weight` of any of the
    heads `stored` (BERT's, RoBERTa's, ALBERT's, ELECTRA's generator's)."""
    return {f"{layer}/{weight}": Source(*stored, transpose=transpose)}


_MLM = ("cls.predictions.transform", "lm_head", "predictions", "generator_predictions")
_MLM_NORM = ("cls.predictions.transform.LayerNorm", "lm_head.layer_norm", "predictions.LayerNorm",
             "generator_predictions.LayerNorm")

# The embeddings, which DeBERTa stores under the same names.
EMBEDDINGS = {
    f"{names.EMBEDDING_TOKEN}/embeddings": Source("embeddings.word_embeddings.weight"),
    f"{names.EMBEDDING_SEGMENT}/embeddings": Source("embeddings.token_type_embeddings.weight"),
    f"{names.EMBEDDING_POSITION}/embeddings": Source("embeddings.position_embeddings.weight"),
    **torch_layer_norm(names.EMBEDDING_NORM, "embeddings.LayerNorm"),
}

ENTRIES = {
    **EMBEDDINGS,
    **bert_block("{layer}", BERT_LAYER, ALBERT_LAYER, torch=True),
    # ALBERT's and ELECTRA's factorised embeddings, then ALBERT's one block,
    # shared by every layer.
    **_heads(names.EMBEDDING_MAPPING, "kernel", "encoder.embedding_hidden_mapping_in.weight",
             "embeddings_project.weight", transpose=True),
    **_heads(names.EMBEDDING_MAPPING, "bias", "encoder.embedding_hidden_mapping_in.bias",
             "embeddings_project.bias"),
    **bert_block(None, ALBERT_LAYER, torch=True),
    **_heads(names.POOLER, "kernel", "pooler.dense.weight", "pooler.weight", transpose=True),
    **_heads(names.POOLER, "bias", "pooler.dense.bias", "pooler.bias"),
    # BERT's next-sentence or ALBERT's sentence-order head.
    **_heads(names.NSP, "kernel", "cls.seq_relationship.weight",
             "sop_classifier.classifier.weight", transpose=True),
    **_heads(names.NSP, "bias", "cls.seq_relationship.bias", "sop_classifier.classifier.bias"),
    # ELECTRA's discriminator head (`ElectraForPreTraining`).
    **torch_linear(names.DISCRIMINATOR_DENSE, "discriminator_predictions.dense"),
    **torch_linear(names.DISCRIMINATOR_PREDICTION, "discriminator_predictions.dense_prediction"),
    # BERT's, RoBERTa's, ALBERT's and ELECTRA's generator's masked-LM heads.
    **_heads(names.MLM_DENSE, "kernel", *(f"{head}.dense.weight" for head in _MLM), transpose=True),
    **_heads(names.MLM_DENSE, "bias", *(f"{head}.dense.bias" for head in _MLM)),
    **_heads(names.MLM_NORM, "gamma", *(f"{norm}.weight" for norm in _MLM_NORM)),
    **_heads(names.MLM_NORM, "beta", *(f"{norm}.bias" for norm in _MLM_NORM)),
    # The decoder's bias is the one the logits use; `tie_word_embeddings: false`
    # unties it from `*.bias` too, and safetensors stores only one of a tied pair.
    **_heads(names.MLM_BIAS, "bias", "cls.predictions.decoder.bias", "cls.predictions.bias",
             "lm_head.decoder.bias", "lm_head.bias", "predictions.decoder.bias",
             "predictions.bias", "generator_lm_head.bias"),
    # Only in models with `tie_word_embeddings: false`.
    **_heads(names.MLM_DECODER, "kernel", "cls.predictions.decoder.weight",
             "lm_head.decoder.weight", "predictions.decoder.weight", "generator_lm_head.weight",
             transpose=True),
}

PREFIXES = ("", "bert.", "roberta.", "albert.", "electra.")

# Older checkpoints spell LayerNorm parameters as TensorFlow does.
SPELLINGS = ((".weight", ".gamma"), (".bias", ".beta"))


def legacy_spellings(prefixes):
    """The `spellings` of BERT's layout behind any of `prefixes`: each name,
    and a LayerNorm's also with TensorFlow's `gamma`/`beta`."""

    def spellings(name):
        for prefix in prefixes:
            yield prefix + name
            if "LayerNorm" in name:
                for modern, legacy in SPELLINGS:
                    if name.endswith(modern):
                        yield prefix + name[: -len(modern)] + legacy

    return spellings


NAME_TABLE = NameTable(
    entries=ENTRIES,
    spellings=legacy_spellings(PREFIXES),
    prefixes=PREFIXES,
    # Position ids are a buffer, never a variable.
    ignored=("embeddings.position_ids",),
    # Stored by the task models as copies: a tied decoder is the token
    # embedding, reported only when it differs (an untied decoder loaded
    # into a tied model).
    duplicates={
        f"{head}.weight": "embeddings.word_embeddings.weight"
        for head in ("cls.predictions.decoder", "lm_head.decoder", "predictions.decoder",
                     "generator_lm_head")
    },
)
