"""RoFormer-v2 (Su et al., 2022): RoFormer without biases or norm parameters."""

from keras_attn.models.registry import register_variant
from keras_attn.models.transformer import Transformer


@register_variant("roformer_v2")
class RoformerV2(Transformer):
    """RoFormer-v2: rotary positions, no biases anywhere and norms without
    parameters, in post-LN blocks; the masked-LM head is the tied embedding.

    Su, Wen, Lu, Pan, Murtadha, Liu (2022), ZhuiyiTechnology's
    `roformer-v2`, as bert4keras builds it (`RoFormerV2`):

        h = RMSNorm(token + segment)          (Embedding-Norm; no positions)
        h = h W_map                           (Embedding-Mapping, only when
                                               embedding_size != hidden_size)
        h = RMSNorm(h + Attention(h))         (rotary queries/keys, no biases)
        h = RMSNorm(h + FFN(h))               (no biases)
        logits = (h W_out) E^T                (Output-Mapping when factorised;
                                               E the token embedding, no bias)

    where `RMSNorm(x) = x / sqrt(mean(x^2) + 1e-7)` has no scale or offset
    (bert4keras's `LayerNormalization(zero_mean=False, scale=False,
    offset=False)` at Keras' default epsilon; a config in RoFormer's own
    family uses its `layer_norm_eps`) and the feed-forward's activation is
    the config's `hidden_act` (`relu` in the released configs). There is no
    pooler in the checkpoints; `with_pool` adds an untrained one.

    Checkpoints: bert4keras's RoFormer-v2 checkpoints in Google's format
    (`bert/embeddings/word_embeddings`, `token_type_embeddings`, the
    blocks' `query|key|value|output/dense/kernel`, `intermediate/dense/
    kernel`, `output/dense/kernel`, and
    `bert/encoder/embedding_hidden_mapping_in/kernel` when factorised),
    with a `bert_config.json`. bert4keras maps no name to `Output-Mapping`,
    so a factorised masked-LM model cannot be loaded (the load names the
    variable). Where bert4keras differs: it applies the embedding dropout
    before the embedding norm and adds a dropout before the head (training
    only; the norm makes the first a no-op on the scale of the output), and
    initialises from scratch with its own truncated normal.
    """

    checkpoint_family = "roformer"
    position_encoding = "rotary"
    position_embedding = None
    norm = "rms"
    norm_scale = False
    use_bias = False
    head = "embedding"
    family_layer_norm_epsilon = 1e-7
    refused_config_families = {
        "roformer": (
            "transformers' RoFormer (`model_type: roformer`) is RoFormer v1, whose "
            "biases, norm parameters and masked-LM transform v2 has no place for"
        ),
    }
