"""Prints the README's benchmark table from benchmarks/results/*.json."""

import glob
import json
import os

RESULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")


def main():
    print("| backend | model | measurement | ms | tokens/s | vs keras-hub | of matmul peak |")
    print("| --- | --- | --- | ---: | ---: | ---: | ---: |")
    for path in sorted(glob.glob(os.path.join(RESULTS, "*.json"))):
        with open(path) as file:
            result = json.load(file)
        for row in result["rows"]:
            print(
                f"| {result['backend']} ({result['matmul_gflops']:.0f} GFLOP/s) | {row['model']} "
                f"| {row['measurement']} | {row['seconds'] * 1000:.0f} "
                f"| {row['tokens_per_second']:.0f} | {row['speed_vs_keras_hub']:.2f}x "
                f"| {row['fraction_of_matmul_peak']:.1%} |"
            )


if __name__ == "__main__":
    main()
