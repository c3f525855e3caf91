"""NEZHA (Wei et al., 2019): BERT with functional relative positions."""

from keras_attn.models.bert import Bert
from keras_attn.models.registry import register_variant


@register_variant("nezha")
class Nezha(Bert):
    """NEZHA: BERT whose attention adds fixed sinusoid embeddings of the
    clipped relative position to its keys and values, with no absolute
    position table.

    Wei, Ren, Li, Huang, Liao, Wang, Lin, Jiang, Chen, Liu (2019), "NEZHA:
    Neural Contextualized Representation for Chinese Language
    Understanding", https://arxiv.org/abs/1909.00204. In every block, for
    query `i`, key `j` and `K` the config's `max_relative_position`
    (default 64):

        h = LN(token + segment)                      (Embedding-Norm)
        a_ij = T[clip(j - i, -K, K) + K]             (no weights)
        e_ij = q_i . (k_j + a_ij) / sqrt(d),  p_ij = softmax_j(e_ij)
        h = LN(h + (sum_j p_ij (v_j + a_ij)) W_o)    (post-LN, as BERT)
        h = LN(h + FFN(h))

    `T` is the `(2K + 1, d)` sinusoid table of its row index, `d` the
    per-head width (`keras_attn.layers.FunctionalRelativePosition`, which
    says where this follows the released code rather than the paper). The
    masked-LM head, pooler and feed-forward are BERT's. Nothing depends on
    absolute positions, so the model takes any length
    (`max_position_embeddings` bounds nothing); `attention_window` works
    (banded) and cached generation computes the relative terms from the
    cached slots' positions.

    Checkpoints: NEZHA's Google-format TensorFlow checkpoints (BERT's
    names, no `position_embeddings`; a `bert_config.json` with
    `use_relative_position: true`, or a config with `model_type: nezha`,
    selects this variant; bert4keras's `model="nezha"`). A BERT checkpoint
    loads too, its position table unused (an `UnusedWeightsWarning`): a
    research variant that needs fine-tuning. Hugging Face's NEZHA weights
    are not read. Where bert4keras differs: it always clips at 64 and
    ignores the config's `max_relative_position`.
    """

    position_encoding = "functional_relative"
    position_embedding = None
    checkpoint_family = "nezha"
