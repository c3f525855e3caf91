"""GPT-2 (Radford et al., 2019)."""

from keras_attn.models.gpt import Gpt
from keras_attn.models.registry import register_variant


@register_variant("gpt2")
class Gpt2(Gpt):
    """GPT-2: pre-LN blocks, learned positions, a final norm and the tied
    embedding as the head.

    Radford, Wu, Child, Luan, Amodei, Sutskever (2019), "Language Models are
    Unsupervised Multitask Learners". Each block is `x + Attention(LN(x))`
    then `x + FFN(LN(x))` (`norm_first`), the last followed by `Output-Norm`
    (Hugging Face's `ln_f`); the embeddings are token plus position, not
    normalised; `logits = LN(h) E^T`, no bias. The GELU is the tanh
    approximation (`gelu_new`), LayerNorm's epsilon 1e-5.

    GPT-2's vocabulary has no padding token: a model built from a Hugging
    Face config (`pad_token_id` absent) treats every token as real unless it
    is built with `padding_mask_input=True` and given a `padding_mask`.
    Right padding is what a causal model needs (real tokens never attend to
    later ones); `generate` pads prompts itself.

    Checkpoints: Hugging Face `model_type: gpt2` directories (safetensors or
    `pytorch_model.bin`; its `Conv1D` weights are stored `(in, out)` with the
    queries, keys and values side by side in `c_attn`), and bert4keras's
    TensorFlow names for GPT-2 (`gpt/...`, the block norms as
    `input/LayerNorm`, the final norm `gpt/output/LayerNorm`), with a
    Google-style config. Tokenizer: `keras_attn.BpeTokenizer`.
    """

    checkpoint_family = "gpt2"
    norm_first = True
    family_layer_norm_epsilon = 1e-5
    final_norm = True
    token_types = False
    default_hidden_act = "gelu_approximate"
