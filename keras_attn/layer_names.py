"""The Keras-side names of the layers a model is built with, spelled once.

The template names its layers with these, and every checkpoint name table
maps stored names onto them, so a name changed here changes both. A
variable path is a layer name and a weight name, `"Embedding-Norm/gamma"`;
a name table writes the block index as `"{layer}"`:

>>> attention("{layer}")
'Transformer-{layer}-MultiHeadSelfAttention'
>>> norm(feed_forward(3, stack=ENCODER))
'Encoder-Transformer-3-FeedForward-Norm'
"""

# The model's inputs (an encoder-decoder's are `stack_input(name, stack)`).
TOKEN_IDS = "token_ids"
SEGMENT_IDS = "segment_ids"
PADDING_MASK = "padding_mask"
CONDITION = "condition"

EMBEDDING_TOKEN = "Embedding-Token"
EMBEDDING_SEGMENT = "Embedding-Segment"
EMBEDDING_POSITION = "Embedding-Position"
EMBEDDING_NORM = "Embedding-Norm"
# The projection of factorised embeddings to the blocks' width (ALBERT, ELECTRA).
EMBEDDING_MAPPING = "Embedding-Mapping"
EMBEDDING_DROPOUT = "Embedding-Dropout"
# DeBERTa's shared table of relative-position embeddings.
RELATIVE_EMBEDDING = "Relative-Embedding"
# A bias by distance that every block adds to its scores (ALiBi, KERPLE).
POSITION_BIAS = "Position-Bias"
ATTENTION_MASK = "Attention-Mask"
OUTPUT_NORM = "Output-Norm"
OUTPUT_DROPOUT = "Output-Dropout"
OUTPUT_MAPPING = "Output-Mapping"

# Heads.
POOLER = "Pooler-Dense"
NSP = "NSP"
MLM_DENSE = "MLM-Dense"
MLM_NORM = "MLM-Norm"
MLM_DECODER = "MLM-Decoder"
MLM_BIAS = "MLM-Bias"
MLM_SOFT_CAP = "MLM-Soft-Cap"
DISCRIMINATOR_DENSE = "Discriminator-Dense"
DISCRIMINATOR_PREDICTION = "Discriminator-Prediction"

# The prefixes of a group of layers: the embeddings', the masked-LM head's,
# the discriminator head's.
EMBEDDING_LAYERS = "Embedding-"
MLM_LAYERS = "MLM-"
DISCRIMINATOR_LAYERS = "Discriminator-"

# Masks the template puts on its outputs, by output.
OUTPUT_MASKS = {
    "output": "Output-Mask",
    "sequence_output": "Sequence-Output-Mask",
    "mlm_logits": "MLM-Logits-Mask",
}

# An encoder-decoder's two stacks: a stack's names start with its own.
ENCODER = "Encoder"
DECODER = "Decoder"
# The decoder's language-model head (T5's `lm_head`).
DECODER_OUTPUT_LM = "Decoder-Output-LM"


def in_stack(name, stack=""):
    """`name` in an encoder-decoder's `stack` (`ENCODER`, `DECODER`), or as
    it is for `stack=""`."""
    return f"{stack}-{name}" if stack else name


def block(index=None, stack=""):
    """The prefix of block `index`'s layers, `Transformer-{index}`, or
    `Transformer` for the one block a shared-block variant (ALBERT) uses."""
    return in_stack("Transformer" if index is None else f"Transformer-{index}", stack)


def attention(index=None, stack=""):
    """Block `index`'s self-attention layer."""
    return f"{block(index, stack)}-MultiHeadSelfAttention"


def cross_attention(index=None, stack=DECODER):
    """Block `index`'s attention to the encoder's output."""
    return f"{block(index, stack)}-MultiHeadCrossAttention"


def feed_forward(index=None, stack=""):
    """Block `index`'s feed-forward layer."""
    return f"{block(index, stack)}-FeedForward"


def gated_attention_unit(index=None):
    """Block `index`'s Gated Attention Unit (GAU-alpha's whole block)."""
    return f"{block(index)}-GatedAttentionUnit"


def norm(layer, index=None):
    """The norm before `layer` (pre-LN) or after its residual (post-LN);
    with `index`, one of several (GPT2-ML's `-Norm-0` and `-Norm-1`)."""
    return f"{layer}-Norm" if index is None else f"{layer}-Norm-{index}"


def post_norm(layer):
    """The norm on `layer`'s output before the residual (Gemma 2's)."""
    return f"{layer}-Post-Norm"


def dropout(layer):
    """The dropout on `layer`'s output."""
    return f"{layer}-Dropout"


def add(layer):
    """The residual add after `layer`."""
    return f"{layer}-Add"


# T-TA's second stream of embeddings, its queries (see `embedding_add`).
QUERY_STREAM = "-Query"


def stack_input(name, stack):
    """The input `name` of an encoder-decoder's `stack`: `encoder_token_ids`."""
    return f"{stack.lower()}_{name}"


def embedding_add(stream=""):
    """The add of the embeddings of `stream` (see the template's `embed`)."""
    return f"Embedding-Add{stream}"


def embedding_mask(stream=""):
    """The padding mask put on the embeddings of `stream`."""
    return f"Embedding-Mask{stream}"


def relative_position(stack):
    """The relative-position bias table of an encoder-decoder's `stack`
    (T5's buckets)."""
    return in_stack("Embedding-Relative-Position", stack)
