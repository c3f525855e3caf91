"""GPT (Radford et al., 2018) as bert4keras builds it: BERT's blocks under a
causal mask."""

import keras

from keras_attn.torch_runtime.direct_call import layer_caller
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

    `application="encoder"` returns the last hidden states (after GPT-2's
    final norm), causal as the language model's: each position sees the
    tokens up to it.

    GPT-2 (`"gpt2"`) and GPT2-ML (`"gpt2_ml"`) build on this class.
    """

    applications = ("lm", "encoder")
    checkpoint_family = "gpt"

    def __init__(self, config, with_pool=False, with_nsp=False, **kwargs):
        if with_pool or with_nsp:
            raise ValueError(
                f"{type(self).__name__} has no pooler or next-sentence head (bert4keras's "
                "GPTs have none); build it without with_pool and with_nsp."
            )
        super().__init__(config, **kwargs)
        # Every application is causal: the family was trained so, and its
        # hidden states (`"encoder"`, Hugging Face's `GPT2Model`) are each
        # position's given the tokens before it.
        self.causal = True

    def make_embedding_norm(self):
        return None

    def make_head_layers(self):
        # The pooler and NSP heads are BERT's; GPT's head is the tied
        # embedding (`language_model_head`), or, for a config with
        # `tie_word_embeddings: false` (a GPT-2 saved untied), the
        # checkpoint's own projection (Hugging Face's `lm_head`, no bias).
        if self.config.tie_word_embeddings or not self.with_mlm:
            return {}
        return {
            "lm_decoder": keras.layers.Dense(
                self.config.vocab_size,
                use_bias=False,
                kernel_initializer=self.initializer(),
                name="MLM-Decoder",
            )
        }

    def language_model_head(self, hidden, condition=None, cache_step=None):
        """`h E^T`, the token embedding transposed, or `h W` with an untied
        head."""
        run = layer_caller(cache_step is not None)
        if "lm_decoder" in self.head_layers:
            return run(self.head_layers["lm_decoder"], hidden)
        return run(self.embedding_layers["token"], hidden, reverse=True)
