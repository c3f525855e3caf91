"""torch: training steps captured as CUDA graphs (`TrainGraphs`, `TrainGraph`).

On the CPU, with CUDA's capture and replay emulated (`EmulatedCuda`, whose
capture here puts back what the run wrote: a real capture records without
running): captured steps give the eager steps' weights and logs, a
signature's first step is eager, its second captured, then replayed; what
a graph cannot replay (a seeded dropout, gradient accumulation) runs
eagerly with one warning; keras_attn's AdamW is captured by its tensor
update; a graph is never
replayed after LoRA or a recompile.
On a GPU: 3 captured steps equal 3 eager ones, and two replays draw
different dropout masks."""

import logging

import keras
import numpy as np
import pytest

import keras_attn
from keras_attn.torch_runtime import train_graph
from tests.torch_runtime.emulated_cuda import EmulatedCuda

pytestmark = pytest.mark.skipif(
    keras.config.backend() != "torch", reason="captured training steps are torch's"
)
CONFIG = {
    "vocab_size": 50, "hidden_size": 16, "num_hidden_layers": 1, "num_attention_heads": 2,
    "intermediate_size": 32, "dropout_rate": 0.0, "attention_dropout_rate": 0.0,
}


class CpuTrainGraph(EmulatedCuda, train_graph.TrainGraph):
    """`TrainGraph` with CUDA emulated on the CPU. A real capture records
    the step without running it: the emulated one runs it, then writes the
    variables back as they were."""

    def capture(self, run):
        import torch

        saved = [variable.value.detach().clone() for variable in self.state]
        try:
            return super().capture(run)
        finally:
            with torch.no_grad():
                for variable, value in zip(self.state, saved):
                    variable.value.copy_(value)


class CpuTrainGraphs(train_graph.TrainGraphs):
    graph_class = CpuTrainGraph


def batches(count=3, size=4, length=6, device=None):
    import torch

    rng = np.random.default_rng(0)
    made = []
    for _ in range(count):
        tokens = torch.tensor(rng.integers(1, 50, (size, length)), dtype=torch.int32)
        segments = torch.zeros((size, length), dtype=torch.int32)
        targets = torch.tensor(rng.normal(size=(size, length, 16)), dtype=torch.float32)
        if device is not None:
            tokens, segments, targets = (value.to(device) for value in (tokens, segments, targets))
        made.append(((tokens, segments), targets, None))
    return made


def model_and_step(optimizer, config=CONFIG):
    """A tiny model of fixed initial weights, compiled, and Keras' own eager
    `train_step` of it."""
    keras.utils.set_random_seed(1)
    model = keras_attn.build_transformer_model(dict(config))
    model.compile(optimizer=optimizer, loss="mse", metrics=["mae"])
    return model, lambda data: keras.Model.train_step(model, data)


def train(optimizer, data, graphs=None, config=CONFIG):
    model, step = model_and_step(optimizer, config)
    logs = []
    for batch in data:
        result = step(batch) if graphs is None else graphs(model, batch, step)
        logs.append({name: float(value) for name, value in result.items()})
    return model, logs


def assert_same_training(captured, eager):
    (model, logs), (reference, reference_logs) = captured, eager
    for weight, expected in zip(model.get_weights(), reference.get_weights()):
        np.testing.assert_allclose(weight, expected, atol=1e-5)
    for step_logs, expected in zip(logs, reference_logs):
        assert step_logs.keys() == expected.keys()
        np.testing.assert_allclose(list(step_logs.values()), list(expected.values()), atol=1e-5)


def test_captured_steps_equal_eager_steps():
    data = batches()
    graphs = CpuTrainGraphs()
    captured = train(keras.optimizers.AdamW(1e-2, clipnorm=1.0), data, graphs)
    assert_same_training(captured, train(keras.optimizers.AdamW(1e-2, clipnorm=1.0), data))
    assert (graphs.eager_steps, graphs.captures, graphs.replays) == (1, 1, 1)
    assert "replayed as CUDA graphs at 1 batch signature" in graphs.describe()


def test_replay_copies_the_batch_in_and_the_logs_out():
    data = batches(count=4)
    graphs = CpuTrainGraphs()
    model, step = model_and_step(keras.optimizers.AdamW(0.0))
    for batch in data[:2]:
        graphs(model, batch, step)
    (graph,) = graphs.graphs.values()
    first = graphs(model, data[2], step)
    second = graphs(model, data[3], step)
    assert float(first["loss"]) != float(second["loss"])  # new batch, own copies
    assert first["loss"] is not graph.outputs["loss"]
    # The graph's own buffers, passed back, are not copied onto themselves.
    model.reset_metrics()
    again = graphs(model, graph.data, step)
    model.reset_metrics()
    np.testing.assert_allclose(float(again["loss"]), float(step(data[3])["loss"]), atol=1e-6)


def test_unseeded_dropout_is_captured():
    graphs = CpuTrainGraphs()
    train(keras.optimizers.AdamW(1e-2), batches(), graphs, dict(CONFIG, dropout_rate=0.1))
    assert graphs.captures == 1 and not graphs.refused


def refused_training(optimizer_factory, caplog, config=CONFIG, steps=4):
    data = batches(count=steps)
    graphs = CpuTrainGraphs()
    with caplog.at_level(logging.WARNING, logger="keras_attn"):
        captured = train(optimizer_factory(), data, graphs, config)
    assert_same_training(captured, train(optimizer_factory(), data, config=config))
    assert (graphs.captures, graphs.replays, graphs.eager_steps) == (0, 0, steps)
    warnings = [record for record in caplog.records if "not as a CUDA graph" in record.message]
    assert len(warnings) == 1
    return warnings[0].message, graphs


def test_gradient_accumulation_runs_eagerly(caplog):
    message, graphs = refused_training(
        lambda: keras.optimizers.AdamW(1e-2, gradient_accumulation_steps=2), caplog
    )
    assert "reads a tensor's value on the host" in message
    assert "base_optimizer.py" in message
    assert "eager at a batch signature" in graphs.describe()


def test_keras_sgd_runs_eagerly_naming_its_tensor_alpha(caplog):
    """Keras' torch SGD gives `torch._foreach_add_` its learning rate, a
    tensor, as `alpha`, which torch reads on the host inside the call: on an
    H200 the capture failed with CUDA's "operation failed due to a previous
    error during capture". The watch refuses it before capturing, by place."""
    message, graphs = refused_training(lambda: keras.optimizers.SGD(1e-2), caplog)
    assert "a tensor as _foreach_add_'s alpha" in message
    assert "torch_sgd.py" in message


def test_keras_attn_adamw_is_captured_by_its_tensor_update():
    """keras_attn's AdamW updates eagerly by torch's fused kernel, whose
    step count and learning rate are Python numbers a replay would repeat;
    a recorded step takes Keras' tensor update instead (`recording`), and
    three steps equal three eager (fused) ones."""
    data = batches()
    graphs = CpuTrainGraphs()
    captured = train(keras_attn.optimizers.AdamW(1e-2), data, graphs)
    assert_same_training(captured, train(keras_attn.optimizers.AdamW(1e-2), data))
    assert (graphs.eager_steps, graphs.captures, graphs.replays) == (1, 1, 1)
    assert not graphs.refused


def test_seeded_dropout_runs_eagerly(caplog):
    import torch

    keras.utils.set_random_seed(1)
    inputs = keras.Input((8,))
    outputs = keras.layers.Dense(4)(keras.layers.Dropout(0.5, seed=3)(inputs))
    model = keras.Model(inputs, outputs)
    model.compile(optimizer=keras.optimizers.AdamW(0.1), loss="mse")
    data = (torch.ones((2, 8)), torch.zeros((2, 4)), None)
    graphs = CpuTrainGraphs()
    with caplog.at_level(logging.WARNING, logger="keras_attn"):
        for _ in range(3):
            graphs(model, data, lambda batch: keras.Model.train_step(model, batch))
    assert graphs.captures == 0 and graphs.eager_steps == 3
    (message,) = [record.message for record in caplog.records if "CUDA graph" in record.message]
    assert "torch.Generator" in message or "torch_seed_generator" in message


def test_graph_dropped_after_lora_and_recompile():
    data = batches(count=8)
    graphs = CpuTrainGraphs()
    model, step = model_and_step(keras.optimizers.AdamW(1e-2))
    for batch in data[:3]:
        graphs(model, batch, step)
    assert (graphs.captures, graphs.replays) == (1, 1)
    keras_attn.lora.enable_lora(model, rank=2)
    model.compile(optimizer=keras.optimizers.AdamW(1e-2), loss="mse")
    graphs(model, data[3], step)
    assert (graphs.eager_steps, graphs.captures, graphs.replays) == (2, 1, 1)
    graphs(model, data[4], step)
    assert graphs.captures == 2 and len(graphs.graphs) == 1
    graphs(model, data[5], step)
    assert graphs.replays == 2
    # A recompile with the same optimizer makes new metrics: captured again.
    model.compile(optimizer=model.optimizer, loss="mse", metrics=["mae"])
    logs = graphs(model, data[6], step)
    assert "mae" in logs and graphs.replays == 2 and graphs.eager_steps == 3


def test_new_learning_rate_is_read_by_the_replay():
    data = batches(count=4)
    captured = CpuTrainGraphs()
    model, step = model_and_step(keras.optimizers.AdamW(1e-2))
    reference, reference_step = model_and_step(keras.optimizers.AdamW(1e-2))
    for index, batch in enumerate(data):
        if index == 3:
            model.optimizer.learning_rate = 0.05
            reference.optimizer.learning_rate = 0.05
        captured(model, batch, step)
        reference_step(batch)
    assert captured.replays == 2
    for weight, expected in zip(model.get_weights(), reference.get_weights()):
        np.testing.assert_allclose(weight, expected, atol=1e-5)


def test_signatures_beyond_the_limit_run_eagerly():
    graphs = CpuTrainGraphs(limit=1)
    model, step = model_and_step(keras.optimizers.AdamW(0.01))
    long, short = batches(count=2, length=6), batches(count=2, length=4)
    for batch in long + short:
        graphs(model, batch, step)
    assert graphs.captures == 1 and graphs.eager_steps == 3
    assert "1 batch signatures are captured already" in graphs.describe()


def test_batch_off_the_device_is_refused():
    class OnlyCuda(train_graph.TrainGraph):
        pass

    with pytest.raises(train_graph.NotCapturable, match="not a CUDA tensor"):
        OnlyCuda(batches(count=1)[0])


def cuda_available():
    import torch

    return torch.cuda.is_available()


@pytest.mark.skipif(not cuda_available(), reason="needs a CUDA GPU")
def test_on_gpu_captured_steps_equal_eager_and_dropout_draws_new_masks():
    import torch

    data = batches(device="cuda")
    graphs = train_graph.TrainGraphs()
    assert train_graph.on_gpu(data[0])
    captured = train(keras.optimizers.AdamW(1e-2), data, graphs)
    assert_same_training(captured, train(keras.optimizers.AdamW(1e-2), data))
    assert (graphs.eager_steps, graphs.captures, graphs.replays) == (1, 1, 1), graphs.describe()

    # Learning rate 0: the weights stay, so two replays on one batch differ
    # only by their dropout masks.
    graphs = train_graph.TrainGraphs()
    model, step = model_and_step(keras.optimizers.AdamW(0.0), dict(CONFIG, dropout_rate=0.5))
    losses = [float(graphs(model, data[0], step)["loss"]) for _ in range(4)]
    torch.cuda.synchronize()
    assert graphs.replays == 2, graphs.describe()
    assert losses[2] != losses[3]


@pytest.mark.parametrize("how", ["fit", "train_on_batch"])
def test_fit_and_train_on_batch_run_captured_steps_through_the_runner(monkeypatch, how):
    """`fit` and `train_on_batch` of a `TransformerModel` on a GPU (CUDA
    emulated) reach the runner's `TrainGraphs`: the first step eager, the
    second captured, the third replayed, the weights those of eager steps.
    Keras hands the step host batches (NumPy arrays from `train_on_batch`,
    CPU tensors from `fit`): the runner moves them to the model's device
    first, as only device tensors can be captured."""
    import torch

    data = batches()
    x = {name: np.concatenate([batch[0][index].numpy() for batch in data])
         for index, name in enumerate(("token_ids", "segment_ids"))}
    y = np.concatenate([batch[1].numpy() for batch in data])

    def trained(graphs):
        model, _ = model_and_step(keras.optimizers.AdamW(1e-2))
        if graphs:
            # The model's variables count as on the GPU, and a batch as on
            # it once every array in it is a torch tensor (not NumPy).
            monkeypatch.setattr(train_graph, "graph_device", lambda model: torch.device("cpu"))
            monkeypatch.setattr(train_graph, "on_gpu", lambda data: all(
                isinstance(leaf, torch.Tensor)
                for leaf in keras.tree.flatten(data) if leaf is not None
            ))
            model._runner.train_graphs.graph_class = CpuTrainGraph
        if how == "fit":
            model.fit(x, y, batch_size=4, shuffle=False, verbose=0)
        else:
            for start in range(0, len(y), 4):
                batch = {name: value[start:start + 4] for name, value in x.items()}
                model.train_on_batch(batch, y[start:start + 4])
        return model

    eager = trained(False)
    captured = trained(True)
    graphs = captured._runner.train_graphs
    assert (graphs.eager_steps, graphs.captures, graphs.replays) == (1, 1, 1), graphs.describe()
    for weight, expected in zip(captured.get_weights(), eager.get_weights()):
        np.testing.assert_allclose(weight, expected, atol=1e-5)
