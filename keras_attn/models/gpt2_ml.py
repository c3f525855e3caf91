"""GPT2-ML (imcaspar/gpt2-ml), as bert4keras builds it."""

from keras_attn import layer_names as names
from keras_attn.models.gpt import Gpt
from keras_attn.models.registry import register_variant
from keras_attn.models.transformer_block import TransformerBlock


@register_variant("gpt2_ml")
class Gpt2Ml(Gpt):
    """GPT2-ML: the multilingual 1.5B GPT-2 of https://github.com/imcaspar/gpt2-ml,
    whose blocks follow Grover (Zellers et al. 2019, "Defending Against
    Neural Fake News", https://arxiv.org/abs/1905.12616) rather than GPT-2.

    As bert4keras's `GPT2_ML` builds it: token plus position embeddings,
    normalised (`Embedding-Norm`); each block

        x = x + Drop(Attention(x))
        x = Norm_1(x + Drop(FFN(Norm_0(x))))

    (`Transformer-{i}-FeedForward-Norm-0` and `-Norm-1`; the attention has
    no norm of its own); no final norm; logits `h E^T`. LayerNorm's epsilon
    is 1e-5. Checkpoints: its TensorFlow names (`newslm/embeddings/...`,
    `newslm/layer00/...`) with a Google-style config.
    """

    checkpoint_family = "gpt2_ml"
    family_layer_norm_epsilon = 1e-5
    token_types = False
    embedding_norm = True

    def make_block(self, index):
        block = super().make_block(index)
        feed_forward = names.feed_forward(self.block_index(index))
        return TransformerBlock(
            attention=block.attention,
            feed_forward=block.feed_forward,
            attention_norm=None,
            feed_forward_norm=self.layer_norm(names.norm(feed_forward, 0)),
            attention_dropout=block.attention_dropout,
            feed_forward_dropout=block.feed_forward_dropout,
            attention_add=block.attention_add,
            feed_forward_add=block.feed_forward_add,
            norm_first=True,
            feed_forward_output_norm=self.layer_norm(names.norm(feed_forward, 1)),
        )
