"""ALBERT (Lan et al., 2020)."""

from keras_attn.models.registry import register_variant
from keras_attn.models.transformer import Transformer


@register_variant("albert")
class Albert(Transformer):
    """ALBERT: BERT with factorised embeddings and one Transformer block
    shared by every layer.

    Lan, Chen, Goodman, Gimpel, Sharma, Soricut (2020), "ALBERT: A Lite BERT
    for Self-supervised Learning of Language Representations",
    https://arxiv.org/abs/1909.11942. Embeddings are summed and normalised at
    `embedding_size`, then mapped to `hidden_size` by `Embedding-Mapping`;
    the block's layers (`Transformer-MultiHeadSelfAttention`,
    `Transformer-FeedForward`, their `-Dropout`, `-Add`, `-Norm`) are
    created once and applied `num_hidden_layers` times, so the model holds
    one block's weights whatever its depth. The pooler is BERT's; with
    `with_nsp=True` its two-way head reads ALBERT's sentence-order
    classifier. The masked-LM head is BERT's (dense to `embedding_size`,
    activation, LayerNorm, tied token embedding, bias), as in
    `AlbertForMaskedLM`.

    Checkpoints: Google's `albert_config.json` + `model.ckpt-*` and Hugging
    Face `model_type: albert` weights; such a config selects this variant.
    Released ALBERTs have one hidden group of one inner layer; a config with
    `num_hidden_groups` or `inner_group_num` other than 1 is refused.
    Hugging Face's ALBERT configs say `hidden_act: gelu_new` (the tanh
    approximation); `gelu` in a Google `albert_config.json` is read as the
    exact erf GELU, as Hugging Face's converter reads it.

    Tokenizers: the English releases need their SentencePiece model,
    `keras_attn.SpTokenizer("30k-clean.model")`. `SpTokenizer` leaves text
    as given, so lowercase it first: it then gives `AlbertTokenizer`'s ids
    (which also strips accents and rewrites `` and '' as "). The Chinese
    releases ship a WordPiece `vocab_chinese.txt`: use `keras_attn.Tokenizer`.
    """

    shared_block = True
    checkpoint_family = "albert"
