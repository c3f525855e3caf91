"""The traits a variant states: the class attributes of
`keras_attn.Transformer` its hooks read, what each means (`TRAITS`), the
values of those that name a kind (`TRAIT_CHOICES`, which `register_variant`
checks), and the hooks whose override `Transformer.traits()` reports
(`TRAIT_HOOKS`). docs/variants.md lists every registered variant's.
"""

# Every trait a variant may state, with what it means: the class attributes
# the template's hooks read (and, for the LLaMA family, `Llama`'s). A
# variant's resolved traits are `Transformer.traits()` on its class.
TRAITS = {
    "applications": "the `application=` values it builds (the first is the default)",
    "checkpoint_family": "how its checkpoints store their weights (`keras_attn.checkpoints.families`)",
    "attention_layer": "the attention layer of every block",
    "position_encoding": "positions inside the attention: None, `rotary`, `xpos` or NEZHA's `functional_relative`",
    "rotary_layout": "which query/key features RoPE rotates together: `interleaved` pairs (RoFormer) or `half` (LLaMA's `rotate_half`)",
    "position_embedding": "absolute positions added to the embeddings: `learned` (BERT's table), `learned_after_padding` (RoBERTa's, counted from `pad_token_id + 1`), `sinusoidal` or None",
    "relative_position_bias": "a bias by distance added to every block's scores: None, `alibi`, `kerple_log`, `kerple_power` or `sandwich`",
    "mask_diagonal": "whether a query never sees its own key (T-TA)",
    "causal": "whether every application is causal (False: as the application says)",
    "norm": "the norms: `layer` (LayerNorm) or `rms` (RMS norm, no mean)",
    "norm_scale": "whether the norms have a learned scale",
    "norm_scale_offset": "added to the norms' learned scale (Gemma's `x * (1 + w)`: 1.0)",
    "norm_first": "pre-norm blocks `x + f(Norm(x))` instead of post-norm `Norm(x + f(x))`",
    "sublayer_post_norms": "a norm of each sub-layer's output before its residual add (Gemma 2)",
    "final_norm": "a norm after the last block (`Output-Norm`)",
    "embedding_norm": "a norm of the summed embeddings (`Embedding-Norm`)",
    "embedding_scale": "token rows multiplied by `sqrt(hidden_size)` (Gemma)",
    "token_types": "whether it has token types (`segment_ids`) when the config has `type_vocab_size > 0`",
    "use_bias": "whether the projections have biases when the config does not say",
    "default_attention_bias": "whether the attention's projections have biases when the config does not say (`attention_bias`)",
    "attention_output_bias": "whether the attention's output projection has a bias (None: as the others)",
    "query_key_norm": "a per-head RMS norm of the queries and keys (before RoPE)",
    "default_hidden_act": "the feed-forward's activation when the config does not say",
    "default_feed_forward_gated": "whether the feed-forward is gated (GLU) when the config does not say",
    "shared_block": "one block's layers applied at every index (ALBERT)",
    "head": "the language-model head: `transform` (BERT's `Bias(E^T LN(act(Dense(h))))`) or `embedding` (the token embedding alone, `h E^T`, or the checkpoint's untied `MLM-Decoder`)",
    "mlm_dense_bias": "whether the `transform` head's dense layer has a bias",
    "logit_soft_caps": "the config's `attention_logit_soft_cap` and `final_logit_soft_cap` are applied (`c tanh(x / c)`)",
    "pooler": "whether `with_pool` and `with_nsp` may add the pooler and the next-sentence head",
    "family_layer_norm_epsilon": "the norms' epsilon when the config is not in the family's own format (None: the config's)",
}

# The values of the traits that name a kind (checked by `register_variant`).
TRAIT_CHOICES = {
    "rotary_layout": ("interleaved", "half"),
    "position_embedding": ("learned", "learned_after_padding", "sinusoidal", None),
    "relative_position_bias": (None, "alibi", "kerple_log", "kerple_power", "sandwich"),
    "norm": ("layer", "rms"),
    "head": ("transform", "embedding"),
}

# The hooks whose override `traits()` reports: where a variant computes
# something no trait states.
TRAIT_HOOKS = (
    "make_position_embedding", "make_position_bias", "make_embedding_layers",
    "make_attention", "attention_arguments", "attention_scale", "rotary_arguments",
    "make_feed_forward",
    "make_block", "make_head_layers", "language_model_head", "make_attention_mask",
    "make_encoder", "embed", "apply_embeddings", "attention_value", "apply_final_layers",
)
