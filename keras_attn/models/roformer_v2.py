"""RoFormer-v2 (Su et al., 2022): RoFormer without biases or norm parameters."""

import keras

from keras_attn import layers
from keras_attn.torch_runtime.direct_call import layer_caller
from keras_attn.models.registry import register_variant
from keras_attn.models.roformer import Roformer


@register_variant("roformer_v2")
class RoformerV2(Roformer):
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

    use_bias = False
    family_layer_norm_epsilon = 1e-7
    refused_config_families = {
        "roformer": (
            "transformers' RoFormer (`model_type: roformer`) is RoFormer v1, whose "
            "biases, norm parameters and masked-LM transform v2 has no place for"
        ),
    }

    def __init__(self, config, conditional_layer_norm=None, **kwargs):
        if conditional_layer_norm is not None:
            raise ValueError(
                "RoFormer-v2's norms have no scale or offset for a condition to "
                f"modulate; received conditional_layer_norm={conditional_layer_norm!r}."
            )
        super().__init__(config, **kwargs)

    def layer_norm(self, name):
        return layers.RMSNormalization(scale=False, epsilon=self.norm_epsilon(), name=name)

    def make_head_layers(self):
        """The pooler (with `with_pool`) and, for the masked-LM head,
        `Output-Mapping` when the embeddings are factorised."""
        head = {
            role: layer
            for role, layer in super().make_head_layers().items()
            if not role.startswith("mlm_")
        }
        config = self.config
        if self.with_mlm and config.embedding_width != config.hidden_size:
            head["output_mapping"] = keras.layers.Dense(
                config.embedding_width,
                use_bias=False,
                kernel_initializer=self.initializer(),
                name="Output-Mapping",
            )
        return head

    def language_model_head(self, hidden, condition=None, cache_step=None):
        """`(h W_out) E^T`: the tied token embedding, no bias."""
        run = layer_caller(cache_step is not None)
        if "output_mapping" in self.head_layers:
            hidden = run(self.head_layers["output_mapping"], hidden)
        return run(self.embedding_layers["token"], hidden, reverse=True)
