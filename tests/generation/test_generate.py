"""`TransformerModel.generate`: the compiled cached loop against uncached
decoding written here, batching, stopping, and the errors it raises."""

import keras
import numpy as np
import pytest

import keras_attn
from tests.harness import to_numpy

CONFIG = dict(
    vocab_size=40, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
    intermediate_size=24, max_position_embeddings=32, hidden_dropout_prob=0.0,
    attention_probs_dropout_prob=0.0, initializer_range=0.2, type_vocab_size=2,
)
PROMPTS = [[2, 7, 9], [2, 11, 5, 31, 8, 17, 4], [2, 21]]


def _uncached_seq2seq_greedy(model, sources, max_new_tokens):
    """An encoder-decoder's greedy decoding by the full pass: each source
    padded with the pad id (masked in the encoder), the decoder run on the
    start token and every token so far, the argmax at the last of them
    next. The decoder's input has one width throughout (the start token and
    `max_new_tokens` slots, those not generated yet holding the pad id): its
    causal mask keeps later slots out of earlier positions' logits, and one
    shape lets JAX compile its eager ops once, not once per step."""
    config = model.template.config
    width = max(len(source) for source in sources)
    encoder_ids = np.full((len(sources), width), config.pad_token_id, "int32")
    for r, source in enumerate(sources):
        encoder_ids[r, : len(source)] = source
    start = config.decoder_start_token_id
    decoder_ids = np.full((len(sources), max_new_tokens + 1), config.pad_token_id, "int32")
    decoder_ids[:, 0] = config.pad_token_id if start is None else start
    for step in range(max_new_tokens):
        logits = to_numpy(model({"encoder_token_ids": encoder_ids, "decoder_token_ids": decoder_ids}))
        decoder_ids[:, step + 1] = logits[:, step].argmax(-1)
    return decoder_ids[:, 1:]


def uncached_greedy(model, prompts, max_new_tokens, end_token_id=None, min_new_tokens=0,
                    extra_inputs=None):
    """Greedy decoding by the full pass over every row's whole prefix at each
    step: rows right-padded with the pad id to one width (one shape, so
    JAX compiles its eager ops once), which the full pass masks as keys
    under a causal or UniLM mask, and each row's logits read at its own last
    token. `extra_inputs` (a `condition`) are added to every call."""
    unilm = model.application == "unilm"
    pad = model.template.config.pad_token_id
    if model.application == "seq2seq":
        return _uncached_seq2seq_greedy(model, prompts, max_new_tokens)
    rows = [list(prompt) for prompt in prompts]
    done = [False] * len(rows)
    width = max(len(row) for row in rows) + max_new_tokens
    for _ in range(max_new_tokens):
        ids = np.full((len(rows), width), pad, "int32")
        segments = np.zeros_like(ids)
        for r, row in enumerate(rows):
            ids[r, : len(row)] = row
            if unilm:
                segments[r, len(prompts[r]) :] = 1
        inputs = {"token_ids": ids}
        if "segment_ids" in model.input_contract.names:
            inputs["segment_ids"] = segments
        inputs.update(extra_inputs or {})
        logits = to_numpy(model(inputs))
        for r, row in enumerate(rows):
            if done[r]:
                continue
            scores = logits[r, len(row) - 1]
            if end_token_id is not None and len(row) - len(prompts[r]) < min_new_tokens:
                scores[end_token_id] = -np.inf
            row.append(int(np.argmax(scores)))
            done[r] = row[-1] == end_token_id
    new = [row[len(prompt) :] for row, prompt in zip(rows, prompts)]
    return np.array([n + [pad] * (max_new_tokens - len(n)) for n in new])


@pytest.mark.parametrize(
    "variant, application, options",
    [
        ("bert", "lm", {}),
        ("roberta+", "unilm", {"attention_key_size": 12}),
        ("alibi", "lm", {"attention_window": 4}),
    ],
)
def test_greedy_generation_equals_uncached_argmax(variant, application, options):
    model = keras_attn.build_transformer_model(
        CONFIG, variant=variant, application=application, **options
    )
    generated = model.generate(PROMPTS, max_new_tokens=8)
    np.testing.assert_array_equal(generated, uncached_greedy(model, PROMPTS, 8))
    if variant != "bert":
        return  # Stopping is the loop's, the same for every variant.
    # Stopping: a token the first row generates first at step >= 2 becomes
    # the end id; a row stops after it, and never before `min_new_tokens`.
    index = next(i for i in range(2, 8) if generated[0, i] not in generated[0, :i])
    end = int(generated[0, index])
    stopped = model.generate(PROMPTS, max_new_tokens=8, end_token_id=end, min_new_tokens=2)
    np.testing.assert_array_equal(stopped, uncached_greedy(model, PROMPTS, 8, end, 2))
    np.testing.assert_array_equal(stopped[0, : index + 1], generated[0, : index + 1])
    assert (stopped[0, index + 1 :] == 0).all()


def test_generation_runs_past_the_training_length_with_a_windowed_cache():
    """ALiBi with a window: 40 new tokens through a ring of 4 slots per layer,
    equal to uncached decoding with the same window."""
    model = keras_attn.build_transformer_model(
        CONFIG, variant="alibi", application="lm", attention_window=4
    )
    generated = model.generate([[2, 7, 9]], max_new_tokens=40)
    np.testing.assert_array_equal(generated, uncached_greedy(model, [[2, 7, 9]], 40))


@pytest.fixture(scope="module")
def roformer_lm():
    """A RoFormer `"lm"` model shared by the two tests below, which decode
    PROMPTS for 10 tokens: on torch one compiled step serves both."""
    keras.utils.set_random_seed(0)
    return keras_attn.build_transformer_model(CONFIG, variant="roformer", application="lm")


def test_sampling_is_reproducible_under_a_seed(roformer_lm):
    model = roformer_lm
    sampler = keras_attn.samplers.RandomSampler(temperature=2.0)
    first = model.generate(PROMPTS, max_new_tokens=10, sampler=sampler, seed=3)
    np.testing.assert_array_equal(model.generate(PROMPTS, max_new_tokens=10, sampler=sampler, seed=3), first)
    assert (model.generate(PROMPTS, max_new_tokens=10, sampler=sampler, seed=4) != first).any()


def test_seed_none_draws_a_fresh_seed_each_call_without_recompiling(monkeypatch):
    """generate and AutoRegressiveDecoder.random_sample follow one rule:
    None is a fresh seed per call, an explicit seed reproduces. 30 tokens
    at temperature 100 (near uniform over 40 ids): two equal draws are
    astronomically unlikely. The seed is an input of the compiled loop:
    the program is traced once for all calls of one shape."""
    from keras_attn.generation import generator

    traces = []
    compile_loop = generator.compile_loop

    def counting(loop, model):
        def traced(*args):
            traces.append(1)
            return loop(*args)

        return compile_loop(traced, model)

    monkeypatch.setattr(generator, "compile_loop", counting)
    model = keras_attn.build_transformer_model(CONFIG, application="lm")
    sampler = keras_attn.samplers.RandomSampler(temperature=100.0)
    prompts = [[2, 7, 9], [2, 11, 5], [2, 21, 4]]
    first = model.generate(prompts, max_new_tokens=10, sampler=sampler)
    second = model.generate(prompts, max_new_tokens=10, sampler=sampler)
    assert (first != second).any()
    seeded = model.generate(prompts, max_new_tokens=10, sampler=sampler, seed=12)
    np.testing.assert_array_equal(
        model.generate(prompts, max_new_tokens=10, sampler=sampler, seed=12), seeded
    )
    if keras.config.backend() in ("jax", "tensorflow"):
        assert len(traces) == 1, len(traces)  # torch runs the loop eagerly each call

    decoder = keras_attn.AutoRegressiveDecoder(model, maxlen=10)
    samples = [decoder.random_sample([[2, 7, 9]], n=3, temperature=100.0) for _ in range(2)]
    assert any((a != b).any() for a, b in zip(*samples))
    same = [decoder.random_sample([[2, 7, 9]], n=3, temperature=100.0, seed=5) for _ in range(2)]
    for a, b in zip(*same):
        np.testing.assert_array_equal(a, b)
    for seed in (2**31, 1.5, True):
        with pytest.raises(ValueError, match=rf"`seed` must be None or an integer.*{seed!r}"):
            model.generate(prompts, max_new_tokens=10, sampler=sampler, seed=seed)


def test_a_reloaded_model_generates_the_same(tmp_path, roformer_lm):
    model = roformer_lm
    path = str(tmp_path / "lm.keras")
    model.save(path)
    reloaded = keras.saving.load_model(path)
    np.testing.assert_array_equal(
        reloaded.generate(PROMPTS, max_new_tokens=10), model.generate(PROMPTS, max_new_tokens=10)
    )


@pytest.mark.parametrize("application", ["encoder", "mlm"])
def test_models_that_cannot_generate_say_so(application):
    model = keras_attn.build_transformer_model(CONFIG, application=application)
    with pytest.raises(ValueError, match=f"application='lm' or 'unilm'.*{application}"):
        model.generate([[2, 3]], max_new_tokens=3)


def test_tta_cannot_generate():
    model = keras_attn.build_transformer_model(CONFIG, variant="tta", application="mlm", mask_token_id=3)
    with pytest.raises(ValueError, match="application='lm' or 'unilm'"):
        model.generate([[2, 3]], max_new_tokens=3)


@pytest.fixture(scope="module")
def bert_lm():
    """One `"lm"` model for the tests below that compare its calls with one
    another or check what it refuses, never with fixed tokens: calls of one
    shape share its compiled decoding loop (one compilation, not one per
    test or parameter)."""
    keras.utils.set_random_seed(0)
    return keras_attn.build_transformer_model(CONFIG, application="lm")


def test_tokenizer_style_prompts_are_right_padded_rows(bert_lm):
    model = bert_lm
    ids = np.array([[2, 7, 9, 0, 0], [2, 11, 5, 31, 8]], "int32")
    mask = (ids != 0).astype("int32")
    np.testing.assert_array_equal(
        model.generate({"token_ids": ids, "padding_mask": mask}, max_new_tokens=3),
        model.generate([[2, 7, 9], [2, 11, 5, 31, 8]], max_new_tokens=3),
    )
    with pytest.raises(ValueError, match="Prompt 0's `padding_mask` is not right-padded"):
        model.generate({"token_ids": ids, "padding_mask": mask[:, ::-1]}, max_new_tokens=3)


@pytest.mark.parametrize(
    "prompts, kwargs, message",
    [
        ([[2, 3]], {"max_new_tokens": 31}, "exceeds the 32 positions"),
        ([[2, 3]], {"max_new_tokens": 0}, "`max_new_tokens` must be a positive integer"),
        ([[2, 3], []], {"max_new_tokens": 3}, "Prompt 1 is empty"),
        ([[2, 3]], {"max_new_tokens": 3, "end_token_id": 40}, "outside the vocabulary"),
        ([[2, 45]], {"max_new_tokens": 3}, "45"),
        ([[2, 3]], {"max_new_tokens": 3, "min_new_tokens": 4}, "min_new_tokens"),
    ],
)
def test_bad_generation_requests_are_errors(prompts, kwargs, message, bert_lm):
    model = bert_lm
    with pytest.raises(ValueError, match=message):
        model.generate(prompts, **kwargs)


@pytest.mark.parametrize(
    "prompts",
    [
        [[2.0, 7.6, 9.0]],
        [[2, 7, 9], [2.0, 7.6]],
        np.array([[2.0, 7.6, 9.0]]),
        {"token_ids": np.array([[2.0, 7.6, 9.0]]), "padding_mask": np.ones((1, 3), "int32")},
    ],
)
def test_fractional_prompt_ids_are_refused_as_the_model_refuses_them(prompts, bert_lm):
    """The ids the model's own call refuses (7.6 is no token) are refused,
    not truncated to 7; whole floats are the ids they name."""
    model = bert_lm
    fraction = r"non-integer value 7\.[56]\d*"  # 7.6 as float64 prints 7.5999999999999996
    with pytest.raises(ValueError, match=fraction) as from_model:
        model({"token_ids": np.array([[2.0, 7.6, 9.0]]), "segment_ids": np.zeros((1, 3), "int32")})
    row = 1 if isinstance(prompts, list) and len(prompts) == 2 else 0
    with pytest.raises(ValueError, match=rf"{fraction} at \({row}, 1\)") as raised:
        model.generate(prompts, max_new_tokens=2)
    assert type(raised.value) is type(from_model.value)
    np.testing.assert_array_equal(
        model.generate([[2.0, 7.0, 9.0]], max_new_tokens=2),
        model.generate([[2, 7, 9]], max_new_tokens=2),
    )


@pytest.mark.parametrize(
    "prompts, error, message",
    [
        ("hello", TypeError, "token ids, not text: received the str 'hello'"),
        ([[2, 7], "hello"], TypeError, "Prompt 1 is the str 'hello'"),
        ([[2, [5, 6]], [2, 7]], ValueError, r"Prompt 0's element 1 is \[5, 6\] \(list\)"),
        ([2, [5, 6]], ValueError, r"mixes token ids and sequences: element 0 is 2, element 1 is \[5, 6\]"),
        ([[2, 7], np.array([[2, 3], [4, 5]])], ValueError, r"Prompt 1 has shape \(2, 2\)"),
        (
            {"token_ids": np.array([[2, 3, 4]]), "padding_mask": np.array([[1, 1]])},
            ValueError,
            r"'padding_mask' has shape \(1, 2\), but 'token_ids' has shape \(1, 3\)",
        ),
        (
            {"token_ids": np.array([[2, 3, 4]]), "padding_mask": np.array([1, 1, 1])},
            ValueError,
            r"'padding_mask' has shape \(3,\), but 'token_ids' has shape \(1, 3\)",
        ),
        ({"token_ids": [[2, 3], [2]]}, ValueError, "'token_ids' is ragged"),
        ({"token_ids": np.array([2, 3])}, ValueError, r"\(batch, length\).*shape \(2,\)"),
        (np.array([[2, 3], [2, 3, 4]], dtype=object), ValueError, r"numpy object array \(dtype=object, shape \(2,\)\)"),
        (np.array([["a", "b"]]), ValueError, "integer token ids; received dtype <U1"),
    ],
)
def test_malformed_prompts_are_named_errors(prompts, error, message, bert_lm):
    """Prompts that are not token ids are refused naming the row, the
    element or the shapes, not with numpy's message."""
    model = bert_lm
    with pytest.raises(error, match=message):
        model.generate(prompts, 4)


def test_prompts_of_every_accepted_form_generate_the_same(bert_lm):
    """A prompt as a list, a tuple, a 1D array, a (1, length) array among
    lists, or numpy integers gives the same tokens: the checks above refuse
    only what is not a flat sequence of ids."""
    model = bert_lm
    expected = model.generate([[2, 7, 9], [2, 11]], 3)
    for prompts in (
        ([2, 7, 9], (2, 11)),
        [np.array([2, 7, 9]), np.array([[2, 11]])],
        [[np.int64(2), 7, 9], [2, np.int32(11)]],
    ):
        np.testing.assert_array_equal(model.generate(list(prompts), 3), expected)
    np.testing.assert_array_equal(model.generate(np.array([2, 7, 9]), 3), expected[:1])


@pytest.mark.skipif(
    keras.config.backend() != "tensorflow",
    reason="tf.function's retracing warning; torch's compiles per shape are counted in "
    "tests/torch_runtime/test_compiled_step.py",
)
def test_generating_over_many_prompt_buckets_logs_no_retracing_warning():
    """Each prompt bucket (and batch size) compiles its own loop, once. On
    TensorFlow, tf.function counted every loop's traces together (they
    share one Python function), and the fifth program logged "triggered
    tf.function retracing"; no warning may be logged or raised."""
    import logging
    import warnings

    records = []

    class Collect(logging.Handler):
        def emit(self, record):
            records.append(record)

    handler = Collect(level=logging.WARNING)
    loggers = [logging.getLogger(), logging.getLogger("tensorflow")]
    for logger in loggers:
        logger.addHandler(handler)
    model = keras_attn.build_transformer_model(CONFIG, application="lm")
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            # Buckets 8, 16 and 30 (32 positions less 2 new tokens), then two
            # more batch sizes: five programs.
            for prompts in ([[2] * 3], [[2] * 9], [[2] * 17], [[2] * 3] * 2, [[2] * 3] * 3):
                generated = model.generate(prompts, 2)
                assert generated.shape == (len(prompts), 2)
    finally:
        for logger in loggers:
            logger.removeHandler(handler)
    messages = [record.getMessage() for record in records] + [str(w.message) for w in caught]
    assert not [m for m in messages if "retracing" in m], messages


def test_models_with_a_padding_mask_input_generate_as_their_full_pass():
    """Without pad ids to go by, prompt padding is the prompts' lengths: a
    UniLM source (seen bidirectionally) must not see the padding after it."""
    model = keras_attn.build_transformer_model(
        CONFIG, application="unilm", padding_mask_input=True
    )
    generated = model.generate(PROMPTS, max_new_tokens=4)
    width = max(len(prompt) for prompt in PROMPTS) + 4  # one shape: JAX compiles once
    for row, prompt in enumerate(PROMPTS):
        sequence = list(prompt)
        for _ in range(4):
            ids = np.zeros((1, width), "int32")
            ids[0, : len(sequence)] = sequence
            segments = np.zeros_like(ids)
            segments[:, len(prompt):] = 1
            mask = (np.arange(width) < len(sequence)).astype("int32")[None]
            logits = to_numpy(model({"token_ids": ids, "segment_ids": segments, "padding_mask": mask}))
            sequence.append(int(np.argmax(logits[0, len(sequence) - 1])))
        np.testing.assert_array_equal(generated[row], sequence[len(prompt):])


def padded_prompts(prompts):
    """Right-padded `token_ids` and their `padding_mask`, as a tokenizer gives."""
    width = max(len(p) for p in prompts)
    token_ids = np.zeros((len(prompts), width), "int32")
    for row, prompt in enumerate(prompts):
        token_ids[row, : len(prompt)] = prompt
    return {"token_ids": token_ids, "padding_mask": (token_ids != 0).astype("int32")}


def randomize_condition_weights(model):
    """Nonzero condition kernels, so that the condition changes every norm."""
    rng = np.random.default_rng(0)
    for variable in model.weights:
        if variable.path.endswith(("gamma_kernel", "beta_kernel", "hidden_kernel")):
            variable.assign(0.5 * rng.normal(size=variable.shape).astype("float32"))


def test_conditional_layer_norm_model_generates_with_its_condition():
    """A `conditional_layer_norm` UniLM model: cached greedy decoding with
    each prompt's condition equals the full pass given that condition, for
    two conditions that change the model's logits."""
    model = keras_attn.build_transformer_model(
        CONFIG, application="unilm", conditional_layer_norm=3,
        conditional_layer_norm_hidden_size=4,
    )
    randomize_condition_weights(model)
    condition = np.random.default_rng(1).normal(size=(len(PROMPTS), 3)).astype("float32")
    prompts = padded_prompts(PROMPTS)
    for given in (condition, -3 * condition):
        generated = model.generate(dict(prompts, condition=given), 4)
        expected = uncached_greedy(model, PROMPTS, 4, extra_inputs={"condition": given})
        np.testing.assert_array_equal(generated, expected)
    # The two conditions are not interchangeable: the logits differ.
    token_ids = prompts["token_ids"]
    logits = [
        to_numpy(model({"token_ids": token_ids, "segment_ids": np.zeros_like(token_ids), "condition": given}))
        for given in (condition, -3 * condition)
    ]
    assert np.abs(logits[0] - logits[1]).max() > 1e-2
    with pytest.raises(ValueError, match="condition"):
        model.generate(PROMPTS, 4)
    with pytest.raises(ValueError, match="condition"):
        model.generate(dict(prompts, condition=condition[:, :2]), 4)


def test_a_slow_first_call_says_it_is_compiling(monkeypatch, capfd, caplog):
    """A new user's first `generate` on torch compiled for 57 s without a
    word. The first call of each new shape that is slow says what it is
    doing on stderr, once; Keras' `disable_interactive_logging` sends it
    to the `keras_attn` logger instead."""
    import logging

    from keras_attn import progress

    monkeypatch.setattr(progress, "ANNOUNCE_AFTER_SECONDS", 0.0)  # every compile is "slow"
    compiler = "torch.compile" if keras.config.backend() == "torch" else "XLA"
    model = keras_attn.build_transformer_model(
        dict(CONFIG, num_hidden_layers=1), variant="gpt2", application="lm"
    )
    capfd.readouterr()
    model.generate([[2, 7, 9]], max_new_tokens=2)
    said = capfd.readouterr().err
    assert (
        f"keras_attn: compiling the decoding program for batch 1, 10 positions ({compiler}; "
        "once per shape, later calls reuse it) ..."
    ) in said, said
    assert "keras_attn: compiled and ran the first call in " in said, said
    model.generate([[2, 5, 11]], max_new_tokens=2)  # the same shape: nothing to say
    assert "keras_attn" not in capfd.readouterr().err

    keras.config.disable_interactive_logging()
    try:
        with caplog.at_level(logging.INFO, logger="keras_attn"):
            model.generate([[2, 7, 9]] * 2, max_new_tokens=2)
    finally:
        keras.config.enable_interactive_logging()
    assert "compiling the decoding program for batch 2, 10 positions" in caplog.text
    assert "keras_attn" not in capfd.readouterr().err
