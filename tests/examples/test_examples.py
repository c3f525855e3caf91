"""Each example's quick mode runs to the end (slow: `pytest -m slow`);
every example's command line (instant `--help`, where results go) and the
quickstart's tokenizer loading, cheaply."""

import glob
import importlib
import importlib.util
import inspect
import itertools
import json
import os
import re
import subprocess
import sys
import tempfile

import numpy as np
import pytest

EXAMPLES = os.path.join(os.path.dirname(__file__), "..", "..", "examples")

RESEARCH_EXAMPLES = [
    ("attention_basics.py", "attention_basics"),
    ("key_size_bottleneck.py", "key_size_bottleneck"),
    ("talking_heads.py", "talking_heads"),
    ("tta_vs_mlm.py", "tta_vs_mlm"),
    ("length_extrapolation.py", "length_extrapolation"),
    ("rope_scaling_extrapolation.py", "rope_scaling_extrapolation"),
]


RESULTS = os.path.join(EXAMPLES, "results")

# Every script of examples/ (the others are modules the scripts import).
SCRIPTS = sorted(
    os.path.relpath(path, EXAMPLES)
    for path in glob.glob(os.path.join(EXAMPLES, "*.py")) + glob.glob(os.path.join(EXAMPLES, "*", "*.py"))
    if 'if __name__ == "__main__":' in open(path, encoding="utf-8").read()
)


def results_snapshot():
    """Each committed result file and its contents' modification time."""
    return {name: os.stat(os.path.join(RESULTS, name)).st_mtime_ns for name in sorted(os.listdir(RESULTS))}


def run_example(script, *arguments, timeout=900):
    """`python examples/<script> <arguments>` in a scratch working
    directory, with this checkout's keras_attn; the completed process. The
    committed results must come out untouched."""
    checkout = os.path.abspath(os.path.join(EXAMPLES, ".."))
    environment = dict(
        os.environ, PYTHONPATH=os.pathsep.join(filter(None, [checkout, os.environ.get("PYTHONPATH")]))
    )
    # As a user runs them: torch compiles a decoding step once it pays (the
    # default), not at its first step as the rest of the suite has it.
    environment.pop("KERAS_ATTN_TORCH_COMPILE", None)
    committed = results_snapshot()
    with tempfile.TemporaryDirectory() as scratch:
        result = subprocess.run(
            [sys.executable, os.path.join(EXAMPLES, script), *arguments],
            capture_output=True, text=True, timeout=timeout, env=environment, cwd=scratch,
        )
    assert results_snapshot() == committed, f"{script} wrote into examples/results/"
    return result


def run(script, *arguments):
    """The standard output of an example that must succeed."""
    result = run_example(script, *arguments)
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout


def assert_plotted(path):
    """The example's plot exists, where the `[examples]` extra (matplotlib)
    is installed; without it the example writes its JSON only."""
    if importlib.util.find_spec("matplotlib") is not None:
        assert path.stat().st_size > 0
    else:
        assert not path.exists()


@pytest.mark.slow
def test_quickstart(tmp_path):
    output = run("quickstart.py", "--quick", "--output", str(tmp_path))
    assert "equal to 1e-5" in output
    # Its output is a pipe here, as in a log: plain lines, no progress bars.
    assert not set("\r\b\x1b") & set(output), repr(output[:2000])
    assert "1 epoch of" in output and "1 epochs" not in output
    if keras_backend() != "torch":
        assert "compiling the training step with XLA" in output
    with open(tmp_path / "quickstart.json") as file:
        results = json.load(file)
    assert results["max_cosine_difference_vs_transformers"] <= 1e-5
    assert results["reload_max_difference"] <= 1e-5
    # Fine-tuned on 144 lines of three packages, it beats the majority class.
    assert results["held_out_accuracy"] > results["majority_class"] + 0.1


@pytest.mark.slow
def test_long_documents_quick_mode(tmp_path):
    """The real MiniLM on 640-token documents, every method: each first
    half finds its second half among 6 modules better than chance."""
    output = run("long_documents.py", "--quick", "--output", str(tmp_path))
    with open(tmp_path / "long_documents.json") as file:
        results = json.load(file)
    assert results["_meta"]["backend"] == keras_backend()
    methods = results["640"]
    assert set(methods) == {"truncation", "hierarchical", "hierarchical + window + log-n",
                            "chunk-and-average"}, output
    for method, numbers in methods.items():
        assert numbers["top1_accuracy"] > results["_meta"]["chance"], method
        assert numbers["seconds_per_document"] > 0


@pytest.mark.slow
def test_finetune_classifier_quick_mode(tmp_path):
    """Quick mode shows the job working: one epoch printed "held-out
    accuracy 0.500 (majority class 0.500)"."""
    output = run("finetune_classifier.py", "--quick", "--output", str(tmp_path))
    assert "the classifier learned the task" in output, output[-2000:]
    with open(tmp_path / "finetune_classifier.json") as file:
        results = json.load(file)
    assert results["held_out_accuracy"] > results["majority_class"] + 0.1
    assert_plotted(tmp_path / "finetune_classifier.png")


@pytest.mark.slow
@pytest.mark.parametrize("script, name", RESEARCH_EXAMPLES)
def test_research_example_quick_mode(script, name, tmp_path):
    run(script, "--quick", "--output", str(tmp_path))
    with open(tmp_path / f"{name}.json") as file:
        results = json.load(file)
    assert results["_meta"]["backend"] == os.environ.get("KERAS_BACKEND", "tensorflow")
    assert_plotted(tmp_path / f"{name}.png")


@pytest.mark.slow
def test_seq2seq_docstrings_quick_mode(tmp_path):
    output = run("seq2seq_docstrings.py", "--quick", "--output", str(tmp_path))
    assert "Held-out docstring summaries" in output
    with open(tmp_path / "seq2seq_docstrings.json") as file:
        results = json.load(file)
    assert results["_meta"]["backend"] == os.environ.get("KERAS_BACKEND", "tensorflow")
    scores = results["seq2seq"]["scores"]
    for decoder in ("greedy", "top-p 0.9 (T=0.8, seed 0)", "nearest-neighbour baseline"):
        assert 0.0 <= scores[decoder]["word_f1"] <= 1.0
    lm = results["windowed_lm"]
    # The windowed cache holds the window's keys however long the generation;
    # without a window it holds every position.
    assert lm["attention_window=64"]["cache_capacity"] == 64
    assert lm["full attention"]["cache_capacity"] == lm["length"]
    assert len(lm["attention_window=64"]["generated"]) > 0
    # Within the training length the window sees every earlier position.
    np.testing.assert_allclose(
        lm["attention_window=64"]["nll_by_block"][0], lm["full attention"]["nll_by_block"][0],
        rtol=1e-4,
    )
    assert_plotted(tmp_path / "seq2seq_docstrings.png")


@pytest.mark.slow
def test_t5_docstrings_quick_mode(tmp_path):
    output = run("t5_docstrings.py", "--quick", "--output", str(tmp_path))
    assert "Held-out pairs" in output
    with open(tmp_path / "t5_docstrings.json") as file:
        results = json.load(file)
    assert results["_meta"]["backend"] == os.environ.get("KERAS_BACKEND", "tensorflow")
    t5, gpt2 = results["t5"], results["gpt2"]
    assert 0.0 <= t5["held_out_token_accuracy"] <= 1.0
    # Perplexities of models trained from random weights: finite, below a
    # uniform guess over the vocabulary.
    for perplexity in (t5["held_out_summary_perplexity"], gpt2["held_out_perplexity"],
                       gpt2["held_out_summary_perplexity"],
                       t5["held_out_summary_perplexity_other_signatures"],
                       gpt2["held_out_summary_perplexity_other_signatures"]):
        assert 1.0 < perplexity < results["vocab_size"]
    for decoder in ("T5 greedy", "T5 beam search (4 beams)", "GPT-2 greedy", "nearest-neighbour baseline"):
        assert 0.0 <= results["scores"][decoder]["word_f1"] <= 1.0
    assert set(results["samples"][0]) >= {"signature", "reference", "T5 greedy", "GPT-2 greedy"}
    assert_plotted(tmp_path / "t5_docstrings.png")


def _example_module(name):
    sys.path.insert(0, EXAMPLES)
    try:
        return importlib.import_module(name)
    finally:
        sys.path.remove(EXAMPLES)


def test_docstring_scores_against_brute_force():
    """The docstring examples' ROUGE-L (dynamic programming) and word F1
    against the longest common subsequence found by trying every
    subsequence, and against counting shared words one by one."""
    example = _example_module("common")
    rng = np.random.default_rng(0)
    words = ["return", "the", "a", "file", "of"]
    for _ in range(200):
        prediction = list(rng.choice(words, rng.integers(0, 7)))
        reference = list(rng.choice(words, rng.integers(1, 7)))
        longest = max(
            (
                size
                for size in range(len(prediction) + 1)
                for chosen in itertools.combinations(prediction, size)
                if _is_subsequence(chosen, reference)
            ),
            default=0,
        )
        shared, remaining = 0, list(reference)
        for word in prediction:
            if word in remaining:
                remaining.remove(word)
                shared += 1
        for measure, count in ((example.rouge_l, longest), (example.word_f1, shared)):
            expected = 0.0 if count == 0 else 2 * count / (len(prediction) + len(reference))
            assert measure(prediction, reference) == pytest.approx(expected)


def _is_subsequence(items, sequence):
    iterator = iter(sequence)
    return all(any(item == other for other in iterator) for item in items)


def keras_backend():
    return os.environ.get("KERAS_BACKEND", "tensorflow")


# Modules whose import makes `--help` take seconds.
HEAVY_MODULES = ("keras", "keras_attn", "tensorflow", "jax", "torch", "transformers")

HELP_PROBE = """
import argparse, runpy, sys
undocumented = []
add_argument = argparse._ActionsContainer.add_argument

def recording(self, *args, **kwargs):
    action = add_argument(self, *args, **kwargs)
    if not action.help:
        undocumented.append((action.option_strings or [action.dest])[0])
    return action

argparse._ActionsContainer.add_argument = recording
script = sys.argv[1]
sys.argv = [script, "--help"]
try:
    runpy.run_path(script, run_name="__main__")
except SystemExit as exit:
    code = exit.code
else:
    code = None
heavy = [name for name in {heavy!r} if name in sys.modules]
print("options without help", undocumented)
print("exit", code, "imported", heavy)
""".format(heavy=HEAVY_MODULES)


@pytest.mark.parametrize("script", SCRIPTS)
def test_help_is_instant_imports_no_keras(script):
    """`--help` parses the command line before Keras (or a backend) is
    imported; scripts that write results say where and take
    `--update-results`; every option has a help text."""
    result = subprocess.run(
        [sys.executable, "-c", HELP_PROBE, os.path.join(EXAMPLES, script)],
        capture_output=True, text=True, timeout=120,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "usage:" in result.stdout
    assert result.stdout.strip().endswith("exit 0 imported []"), result.stdout[-500:]
    assert "options without help []" in result.stdout, result.stdout[-500:]
    if script != "serve_exported.py":
        assert "--update-results" in result.stdout and "keras_attn_results" in result.stdout


def test_results_go_to_a_scratch_folder_unless_asked_to_update(tmp_path, monkeypatch, capsys):
    """A run, quick or not, writes to ./keras_attn_results/ (or --output);
    only --update-results writes the committed examples/results/, and
    never from --quick (which replaced a held-out accuracy of 0.9566 with
    0.5)."""
    example = _example_module("finetune_classifier")
    common = _example_module("common")
    assert example.parse_arguments(["--quick"]).output == "keras_attn_results"
    assert example.parse_arguments(["--output", str(tmp_path)]).output == str(tmp_path)
    updating = example.parse_arguments(["--update-results"]).output
    assert os.path.samefile(updating, RESULTS)
    for refused in (["--quick", "--update-results"], ["--output", "x", "--update-results"]):
        with pytest.raises(SystemExit):
            example.parse_arguments(refused)
    assert "--update-results" in capsys.readouterr().err

    monkeypatch.chdir(tmp_path)
    committed = results_snapshot()
    common.write_results("finetune_classifier", {"held_out_accuracy": 0.5})
    assert results_snapshot() == committed
    with open(tmp_path / "keras_attn_results" / "finetune_classifier.json") as file:
        assert json.load(file) == {"held_out_accuracy": 0.5}
    printed = capsys.readouterr().out
    assert "wrote keras_attn_results/finetune_classifier.json" in printed
    assert "--update-results" in printed  # says where the committed results are


def test_without_matplotlib_only_the_json_is_announced(tmp_path, monkeypatch, capsys):
    """With matplotlib absent, the printed line names the JSON alone and
    says why there is no plot."""
    common = _example_module("common")
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # `import matplotlib` raises ImportError
    common.write_results("curves", {"loss": 1.0}, {"loss": ([1, 2], [2.0, 1.0])}, directory=str(tmp_path))
    printed = capsys.readouterr().out
    assert f"wrote {tmp_path}/curves.json (no plot: matplotlib is not installed" in printed
    assert ".png" not in printed
    assert sorted(os.listdir(tmp_path)) == ["curves.json"]


def test_with_matplotlib_the_plot_is_announced(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    common = _example_module("common")
    common.write_results("curves", {"loss": 1.0}, {"loss": ([1, 2], [2.0, 1.0])}, directory=str(tmp_path))
    assert f"wrote {tmp_path}/curves.json and {tmp_path}/curves.png" in capsys.readouterr().out
    assert (tmp_path / "curves.png").stat().st_size > 0


def write_bert_tokenizer_directory(directory, vocabulary, keep=("tokenizer.json",)):
    """A tokenizer as transformers' `save_pretrained` writes it for a
    WordPiece BERT, keeping only the files `keep`."""
    transformers = pytest.importorskip("transformers")
    vocab = directory / "source_vocab.txt"
    vocab.write_text("\n".join(vocabulary) + "\n", encoding="utf-8")
    parameters = inspect.signature(transformers.BertTokenizerFast.__init__).parameters
    argument = "vocab" if "vocab" in parameters else "vocab_file"
    transformers.BertTokenizerFast(**{argument: str(vocab)}).save_pretrained(str(directory))
    for name in os.listdir(directory):
        if name not in keep:
            os.remove(directory / name)
    return transformers


def test_quickstart_reads_a_directory_with_tokenizer_json_only(tmp_path):
    """A model directory without vocab.txt: the tokenizer comes from its
    tokenizer.json, with transformers' ids."""
    vocabulary = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cat", "sat", "on", "mat",
                  "##s", ".", "a", "dog"]
    transformers = write_bert_tokenizer_directory(tmp_path, vocabulary)
    assert sorted(os.listdir(tmp_path)) == ["tokenizer.json"]
    tokenizer = _example_module("quickstart").load_tokenizer(str(tmp_path))
    reference = transformers.AutoTokenizer.from_pretrained(str(tmp_path))
    for text in ("The cats sat on the mat.", "A dog sat on a cat", "unknown words"):
        assert tokenizer.encode(text)[0] == reference(text)["input_ids"]


# TensorFlow's C++ start-up lines (absl's INFO/WARNING prefix).
TENSORFLOW_LOG_LINE = re.compile(r"^(?:[IW]\d{4} \d\d:\d\d:|WARNING: All log messages before absl)", re.M)


def test_quickstart_without_tokenizer_files_says_what_is_missing_in_one_line(tmp_path):
    """No vocab.txt and no tokenizer.json: one line naming the directory
    and both files, no traceback, and none of TensorFlow's start-up logs."""
    (tmp_path / "config.json").write_text('{"model_type": "bert"}')
    result = run_example("quickstart.py", "--model", str(tmp_path), timeout=300)
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    assert result.stderr.strip().splitlines()[-1] == (
        f"quickstart: Directory {str(tmp_path)!r} holds no tokenizer: neither a vocab.txt nor "
        "a tokenizer.json."
    )
    assert not TENSORFLOW_LOG_LINE.search(result.stderr), result.stderr[:2000]


def test_examples_print_no_tensorflow_start_up_lines():
    """Every example parses its arguments with `parse_example_arguments`,
    which imports Keras quietly; seeding (which loads TensorFlow on every
    backend where it is installed) then prints nothing either. Only the
    quickstart did this before: the other examples began with
    TensorFlow's start-up lines."""
    code = (
        f"import sys; sys.path.insert(0, {EXAMPLES!r}); import common\n"
        "common.parse_example_arguments(common.example_arguments('probe'), [])\n"
        "import keras; keras.utils.set_random_seed(0); print('seeded')\n"
    )
    environment = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=environment,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip() == "seeded"
    assert result.stderr == "", result.stderr[:2000]
