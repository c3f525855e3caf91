"""Training helpers for bert4keras-style recipes on every Keras backend."""

from keras_attn.training.adversarial_training import adversarial_training
