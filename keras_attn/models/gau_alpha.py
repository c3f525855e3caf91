"""GAU-alpha (Su et al., 2022): RoFormer-v2 with Gated Attention Units as blocks."""

import keras

from keras_attn import layer_names as names
from keras_attn import layers
from keras_attn.models.registry import register_variant
from keras_attn.models.roformer_v2 import RoformerV2
from keras_attn.models.transformer_block import TransformerBlock


@register_variant("gau_alpha")
class GauAlpha(RoformerV2):
    """GAU-alpha: RoFormer-v2's embeddings and head around blocks that are a
    single Gated Attention Unit each, without a feed-forward.

    ZhuiyiTechnology's GAU-alpha (Su, Pan, Wen, Liu 2022,
    https://kexue.fm/archives/9052, https://github.com/ZhuiyiTechnology/GAU-alpha),
    as its `GAU_alpha(RoFormerV2)` builds it with bert4keras:

        h = RMSNorm(token + segment)            (Embedding-Norm; no positions)
        h = RMSNorm(h + GAU(h))                 (each block, post-norm)
        logits = h E^T                          (the tied token embedding)

    where `RMSNorm` has no scale or offset (RoFormer-v2's) and `GAU` is a
    `keras_attn.layers.GatedAttentionUnit` with `units` the config's
    `intermediate_size`, `key_size` its `attention_key_size` (else the head
    size), the activation its `hidden_act` (`swish` when unset), rotary
    queries and keys, no biases or offsets and the `"softmax_plus"`
    normalisation: `softmax(a * log(max(n, 16)) / log(512))` over the `n`
    keys a query sees. `num_attention_heads` only sets the default key size.

    Layers: `Transformer-{i}-GatedAttentionUnit` (`-Dropout`, `-Add`,
    `-Norm`), otherwise RoFormer-v2's names.

    Checkpoints: GAU-alpha's Google-format checkpoint with its
    `bert_config.json` (`bert/embeddings/word_embeddings`,
    `token_type_embeddings`, and per layer
    `GAU_alpha/encoder/layer_{i}/gau/i_dense/kernel`,
    `q_scaleoffset/gamma`, `k_scaleoffset/gamma`, `o_dense/kernel`).
    Where bert4keras differs: under a causal (`"lm"`) or seq2seq
    (`"unilm"`) mask it counts every unpadded key in `n`; this class counts
    the keys the query sees, which is what makes cached decoding equal the
    full pass (see `GatedAttentionUnit`). The encoder and `"mlm"` are the
    same.
    """

    checkpoint_family = "gau_alpha"
    default_hidden_act = "swish"

    def attention_name(self, index):
        return names.gated_attention_unit(self.block_index(index))

    def make_attention(self, index):
        config = self.config
        return layers.GatedAttentionUnit(
            units=config.intermediate_size,
            key_size=config.key_size,
            activation=self.hidden_act(),
            normalization="softmax_plus",
            use_bias=self.use_bias,
            attention_dropout=config.attention_dropout_rate,
            attention_window=config.layer_window(index),
            blockwise_attention=config.blockwise_attention,
            position=self.make_position(index),
            log_n_train_length=config.log_n_train_length,
            kernel_initializer=self.initializer(),
            name=self.attention_name(index),
        )

    def make_block(self, index):
        """`Norm(x + Dropout(GAU(x)))`: no feed-forward sub-layer."""
        name = self.attention_name(index)
        return TransformerBlock(
            attention=self.make_attention(index),
            feed_forward=None,
            attention_norm=self.layer_norm(names.norm(name)),
            feed_forward_norm=None,
            attention_dropout=keras.layers.Dropout(
                self.config.dropout_rate, name=names.dropout(name)
            ),
            feed_forward_dropout=None,
            attention_add=keras.layers.Add(name=names.add(name)),
            feed_forward_add=None,
            norm_first=self.norm_first,
        )
