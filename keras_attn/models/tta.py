"""T-TA: the Transformer-based text autoencoder."""

from keras import ops

from keras_attn.layers import masking
from keras_attn.models.bert import Bert
from keras_attn.models.registry import register_variant


@register_variant("tta")
class Tta(Bert):
    """T-TA (Shin, Lee, Jung, 2020, "Fast and Accurate Deep Bidirectional
    Language Representations for Unsupervised Learning",
    https://arxiv.org/abs/2004.08097): predicts every token from all the
    others in one pass.

    - Keys and values of every layer are the same tensor, the layer-0
      embeddings `E = LN(token + position)`; each layer has its own
      projections of them.
    - The query stream starts from positions only,
      `LN(embedding([MASK]) + position)`, with the same tables and LayerNorm;
      padding positions keep the padding id.
    - Every layer masks the diagonal (query `i` never sees key `i`), so the
      prediction at `i` cannot depend on token `i`. `tta_diagonal_mask=False`
      lifts it for fine-tuning, as the paper allows.
    - BERT post-LN blocks act on the query stream; the masked-LM head is the
      tied-embedding softmax at every position (`application="mlm"`).

    `tta_naive_key_value=True` is the ablation whose keys/values come from the
    previous layer instead: position `j`'s state then already holds token `i`,
    and the prediction at `i` leaks its own token from the second layer on.

    Config: `mask_token_id` is required. T-TA has no segment embeddings.
    """

    # Every query is one pass over the other tokens: no causal or seq2seq form.
    applications = ("encoder", "mlm")
    # The config's `tta_diagonal_mask: false` lifts it (for fine-tuning).
    mask_diagonal = True

    def __init__(self, config, **kwargs):
        if config.mask_token_id is None:
            raise ValueError(
                "variant='tta' needs `mask_token_id` (the [MASK] id) in the "
                "config or as an override."
            )
        config = config.replace(segment_vocab_size=0)
        super().__init__(config, **kwargs)
        self.mask_diagonal = config.tta_diagonal_mask

    def apply_embeddings(self, inputs):
        inputs = self.inputs_by_name(inputs)
        token_ids = inputs["token_ids"]
        padding_mask = inputs.get("padding_mask")
        self.key_value = self.embed(token_ids, padding_mask=padding_mask)
        real = masking.real_tokens(token_ids, self.config.pad_token_id, padding_mask)
        mask_ids = ops.where(real, ops.full_like(token_ids, self.config.mask_token_id), token_ids)
        return self.embed(mask_ids, padding_mask=real, stream="-Query")

    def attention_value(self, hidden, index):
        if self.config.tta_naive_key_value and index > 0:
            return hidden
        return self.key_value
