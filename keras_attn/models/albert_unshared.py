"""ALBERT with one block per layer (bert4keras's `ALBERT_Unshared`)."""

from keras_attn.models.registry import register_variant
from keras_attn.models.transformer import Transformer


@register_variant("albert_unshared")
class AlbertUnshared(Transformer):
    """ALBERT's factorised embeddings under BERT's blocks, one per layer.

    The embeddings are ALBERT's (summed and normalised at `embedding_size`,
    then mapped to `hidden_size` by `Embedding-Mapping`); the blocks are
    BERT's `Transformer-{i}-...`, each with weights of its own. Loaded from
    an ALBERT checkpoint (Google `albert_config.json` + `model.ckpt-*`, or
    Hugging Face `model_type: albert`), every block starts from a copy of
    ALBERT's one shared block, so the model computes what `"albert"` does
    until fine-tuning lets the layers differ, as bert4keras's
    `model="albert_unshared"` does. Depth multiplies the weights: a 12-layer
    model holds 12 copies of the block.

    Example:

    ```python
    model = keras_attn.build_transformer_model(
        "albert_config.json", "model.ckpt-best", variant="albert_unshared"
    )
    ```
    """

    checkpoint_family = "albert"
