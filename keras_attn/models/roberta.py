"""RoBERTa (Liu et al., 2019)."""

from keras_attn.models.bert import Bert
from keras_attn.models.registry import register_variant


@register_variant("roberta")
class Roberta(Bert):
    """RoBERTa: BERT whose position table starts after the padding row.

    Liu et al. (2019), "RoBERTa: A Robustly Optimized BERT Pretraining
    Approach", https://arxiv.org/abs/1907.11692. Real tokens take positions
    `pad_token_id + 1, pad_token_id + 2, ...` counted over real tokens only and
    padding takes row `pad_token_id`, as in the released checkpoints (so the
    position table has `max_length + pad_token_id + 1` rows, 514 for 512
    tokens). A config with `type_vocab_size: 1` has no segment input.
    """

    checkpoint_family = "roberta"
    position_embedding = "learned_after_padding"
