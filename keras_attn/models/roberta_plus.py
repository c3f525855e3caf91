"""RoBERTa+: BERT-format checkpoints with a wide key_size and factorised embeddings."""

from keras_attn.models.bert import Bert
from keras_attn.models.registry import register_variant


@register_variant("roberta+")
class RobertaPlus(Bert):
    """RoBERTa+: BERT with decoupled `attention_key_size` and ALBERT-style
    factorised embeddings.

    The small Chinese RoBERTa+ models released alongside bert4keras are stored
    as Google BERT checkpoints whose config adds `attention_key_size` (the
    per-head query/key width, larger than `hidden_size / num_attention_heads`;
    Bhojanapalli et al. 2020, https://arxiv.org/abs/2002.07028) and
    `embedding_size` (< `hidden_size`). Embeddings are summed and normalised at
    `embedding_size`, then mapped to `hidden_size` by
    `bert/encoder/embedding_hidden_mapping_in`; the masked-LM transform maps
    back to `embedding_size` for the tied output embedding.

    Both fields are read from the config by the template, so this variant
    only checks that they are there.
    """

    def __init__(self, config, **kwargs):
        if config.attention_key_size is None and config.embedding_size is None:
            raise ValueError(
                "variant='roberta+' expects `attention_key_size` and/or "
                "`embedding_size` in the config; without them it is variant='bert'."
            )
        super().__init__(config, **kwargs)
