"""Where `import keras_attn` spends its time, per backend.

For each backend, in fresh processes (`--repeats` of them, the median
reported): the seconds to `import keras` (Keras and its backend), then the
seconds `import keras_attn` adds on top, and which top-level packages
keras_attn's import brings that Keras had not (none is the aim: tokenizers,
SentencePiece, safetensors, transformers and TensorFlow on other backends
load only when used). Writes `benchmarks/results/import_time.json`.

    python benchmarks/import_time.py [--repeats 5] [--backends jax torch tensorflow]
"""

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys

PROBE = """
import sys, time
started = time.perf_counter()
import keras
keras_seconds = time.perf_counter() - started
before = set(sys.modules)
started = time.perf_counter()
import keras_attn
own_seconds = time.perf_counter() - started
brought = sorted({name.split(".")[0] for name in set(sys.modules) - before} - {"keras_attn"})
print(keras_seconds, own_seconds, ",".join(brought))
"""


def measure(backend, repeats):
    keras_seconds, own_seconds, brought = [], [], set()
    for _ in range(repeats):
        result = subprocess.run(
            [sys.executable, "-c", PROBE], env=dict(os.environ, KERAS_BACKEND=backend),
            capture_output=True, text=True, check=True,
        )
        first, second, *modules = result.stdout.strip().splitlines()[-1].split(" ")
        keras_seconds.append(float(first))
        own_seconds.append(float(second))
        brought.update(filter(None, ",".join(modules).split(",")))
    return {
        "import_keras_seconds": statistics.median(keras_seconds),
        "keras_attn_on_top_seconds": statistics.median(own_seconds),
        "packages_keras_attn_brings": sorted(brought),
        "repeats": repeats,
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5, help="fresh processes per backend")
    parser.add_argument(
        "--backends", nargs="+", default=["tensorflow", "jax", "torch"], help="Keras backends to measure"
    )
    parser.add_argument(
        "--output", default=os.path.join(os.path.dirname(__file__), "results", "import_time.json"),
        help="where the JSON goes",
    )
    arguments = parser.parse_args()
    results = {"_meta": {"python": platform.python_version(), "cpus": os.cpu_count()}}
    for backend in arguments.backends:
        results[backend] = measure(backend, arguments.repeats)
        row = results[backend]
        print(
            f"{backend:>10}: import keras {row['import_keras_seconds']:.2f} s, keras_attn on top "
            f"{row['keras_attn_on_top_seconds']:.3f} s, brings {row['packages_keras_attn_brings'] or 'nothing else'}"
        )
    with open(arguments.output, "w") as file:
        json.dump(results, file, indent=1)
    print(f"wrote {arguments.output}")


if __name__ == "__main__":
    main()
