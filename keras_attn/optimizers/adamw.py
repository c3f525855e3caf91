"""`AdamW`: `keras.optimizers.AdamW` with a one-pass update on torch."""

import keras

from keras_attn import keras_internals


@keras.saving.register_keras_serializable(package="keras_attn")
class AdamW(keras.optimizers.AdamW):
    """`keras.optimizers.AdamW` (Loshchilov & Hutter, "Decoupled Weight Decay
    Regularization", 2019) whose torch update is one fused kernel.

    Same arguments, same variables, same configuration and the same update
    as Keras' AdamW: with `t = iterations + 1`,

        m <- beta_1 m + (1 - beta_1) g
        v <- beta_2 v + (1 - beta_2) g^2          (v_hat <- max(v_hat, v) with amsgrad)
        w <- w (1 - weight_decay lr)              (Keras' own step, unchanged)
        w <- w - lr sqrt(1 - beta_2^t) / (1 - beta_1^t) m / (sqrt(v) + epsilon)

    On torch the moments and the Adam step (every line but the decay) run as
    `torch._fused_adamw_`, one pass over each weight, its gradient and its
    two moments, where Keras' torch AdamW makes about ten `torch._foreach_*`
    passes over all weights, half of them into new temporaries: on
    BERT-base's 110M weights on a 2-core CPU that is about 1.1 s against
    0.06 s per step (see `docs/speed.md`). Torch's kernel adds its epsilon
    after the bias correction, so it is given `epsilon / sqrt(1 - beta_2^t)`,
    which makes its update Keras' (equal to float32 rounding, tested against
    numpy). Inside `torch.compile` (`jit_compile=True`), where inductor fuses
    Keras' update itself, in a training step captured as a CUDA graph (the
    fused kernel's step count and learning rate are Python numbers, which a
    replay would repeat), and on TensorFlow and JAX it is Keras' AdamW.

    The update overrides Keras' private `Optimizer._backend_update_step`
    (checked in `tests/test_keras_internals.py`); gradient clipping,
    accumulation, EMA and loss scaling are Keras' own and unchanged.

    Example:

    ```python
    import keras
    import keras_attn

    model = keras_attn.build_transformer_model(
        dict(vocab_size=50, hidden_size=16, num_hidden_layers=1,
             num_attention_heads=2, intermediate_size=32),
    )
    model.compile(optimizer=keras_attn.optimizers.AdamW(1e-3), loss="mse")
    ```
    """

    def _backend_update_step(self, grads, trainable_variables, learning_rate):
        if keras.config.backend() != "torch":
            return super()._backend_update_step(grads, trainable_variables, learning_rate)
        import torch

        from keras_attn.torch_runtime import cuda_graph

        if torch.compiler.is_compiling() or cuda_graph.is_recording():
            return keras_internals.torch_adam_update(
                self, grads, trainable_variables, learning_rate
            )
        return keras_internals.fused_adam_update(
            self, grads, trainable_variables, learning_rate
        )
