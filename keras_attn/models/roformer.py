"""RoFormer: rotary position embeddings instead of absolute positions."""

from keras_attn.models.bert import Bert
from keras_attn.models.registry import register_variant


@register_variant("roformer")
class Roformer(Bert):
    """BERT with rotary position embeddings (Su et al., 2021, "RoFormer",
    https://arxiv.org/abs/2104.09864) on queries and keys, and no absolute
    positions: attention scores depend on relative positions only, which is
    what `attention_window` (the LocalMaskBaseline) needs to extrapolate. The
    rotation acts on `key_size` features, so `attention_key_size` may differ
    from the head size."""

    position_encoding = "rotary"

    def make_position_embedding(self):
        return None
