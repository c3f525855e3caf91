"""OutputMask: a tensor passed through with a Keras mask attached."""

import keras
import numpy as np

import keras_attn
from tests.harness import run_layer_test
from tests.harness import to_numpy


def test_output_mask(tmp_path):
    rng = np.random.default_rng(1)
    values = rng.normal(size=(2, 5, 3)).astype("float32")
    mask = np.array([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]], "int32")
    run_layer_test(
        keras_attn.layers.OutputMask,
        {},
        inputs={"inputs": values, "mask": mask},
        expected_output_shape=(2, 5, 3),
        reference=lambda layer, inputs: inputs["inputs"],
        tmp_path=tmp_path,
    )
    layer = keras_attn.layers.OutputMask()
    masked = layer(keras.ops.convert_to_tensor(values), mask=keras.ops.convert_to_tensor(mask))
    pooled = to_numpy(keras.layers.GlobalAveragePooling1D()(masked))
    keep = mask[..., None].astype("float64")
    np.testing.assert_allclose(pooled, (values * keep).sum(1) / keep.sum(1), atol=1e-6)
