"""`AdamW`: `keras.optimizers.AdamW` with a one-pass update on torch."""

import keras

from keras_attn import keras_internals


@keras.saving.register_keras_serializable(package="keras_attn")
class AdamW(keras.optimizers.AdamW):
    """`keras.optimizers.AdamW` (Loshchilov & Hutter, 2019) whose torch update is
    one fused kernel.

    Same arguments, variables, configuration and update as Keras' AdamW: with
    `t = iterations + 1`,

        m <- beta_1 m + (1 - beta_1) g
        v <- beta_2 v + (1 - beta_2) g^2          (v_hat <- max(v_hat, v) with amsgrad)
        w <- w (1 - weight_decay lr)              (Keras' own step)
        w <- w - lr sqrt(1 - beta_2^t) / (1 - beta_1^t) m / (sqrt(v) + epsilon)

    On torch all but the decay run as `torch._fused_adamw_`, given `epsilon /
    sqrt(1 - beta_2^t)` so that it matches Keras' update to float32 rounding
    (timings: docs/speed.md). Inside `torch.compile`, a captured CUDA graph,
    and on TensorFlow and JAX it is Keras' update. Overrides Keras' private
    `Optimizer._backend_update_step` (tests/test_keras_internals.py).

    Example:

    ```python
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
