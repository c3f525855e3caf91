"""The `Transformer` template's hooks by role: embeddings, attention, blocks
and heads (`keras_attn.models.transformer.Transformer` combines them)."""
