"""GPT (Radford et al., 2018) as bert4keras builds it: BERT's blocks under a
causal mask."""

from keras_attn.models.registry import register_variant
from keras_attn.models.transformer import Transformer


@register_variant("gpt")
class Gpt(Transformer):
    """GPT: a causal language model on BERT-format weights, bert4keras's
    `model="gpt"` (the CDial-GPT checkpoints).

    Radford, Narasimhan, Salimans, Sutskever (2018), "Improving Language
    Understanding by Generative Pre-Training". What differs from
    `application="lm"` on BERT, as bert4keras's `GPT` builds it:

    - the summed token, segment and position embeddings are not normalised
      (no `Embedding-Norm`);
    - the head is the tied token embedding alone, `logits = h E^T`: no
      `MLM-Dense`, `MLM-Norm` or bias.

    The blocks are BERT's (post-LN). The outputs are logits (bert4keras
    applies a softmax; `keras_attn.TokenCrossEntropy` and generation take
    logits). Checkpoints: bert4keras's TensorFlow names, BERT's with `bert/`
    read as `gpt/` and `encoder` as `transformer` (`gpt/embeddings/...`,
    `gpt/transformer/layer_0/...`), from a Google-style `bert_config.json`.

    Every application is causal (`causal`): `application="encoder"`
    returns the last hidden states (after GPT-2's final norm), each
    position's given the tokens up to it. A config with
    `tie_word_embeddings: false` has the checkpoint's own projection,
    `MLM-Decoder` (Hugging Face's `lm_head`, no bias).

    GPT-2 (`"gpt2"`) and GPT2-ML (`"gpt2_ml"`) build on this class.
    """

    applications = ("lm", "encoder")
    checkpoint_family = "gpt"
    causal = True
    pooler = False
    embedding_norm = False
    head = "embedding"
