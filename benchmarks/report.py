"""Prints the README's benchmark tables from benchmarks/results/ (and its
per-device folders, such as h100/): BERT-base (`<backend>.json`, from
bert_base.py), banded attention (`banded_attention_*.json`), fused attention
for decoupled widths (`fused_widths_*.json`), the input contract's cost
(`input_contract_*.json`) and generation (`generation_*.json`; the GPT-2
small, T5-small and BERT-decoder rows from `generation_gpt2_t5_*.json`, the
LLaMA rows from `generation_llama_*.json`, the Gemma 2 rows from
`generation_gemma_*.json`)."""

import glob
import json
import os

RESULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")


def load(path):
    with open(path) as file:
        return json.load(file)


def bert_base_table():
    print("| backend | model | measurement | ms | tokens/s | vs keras-hub | of matmul peak |")
    print("| --- | --- | --- | ---: | ---: | ---: | ---: |")
    for backend in ("jax", "tensorflow", "torch"):
        path = os.path.join(RESULTS, f"{backend}.json")
        if not os.path.exists(path):
            continue
        result = load(path)
        for row in result["rows"]:
            print(
                f"| {result['backend']} ({result['matmul_gflops']:.0f} GFLOP/s) | {row['model']} "
                f"| {row['measurement']} | {row['seconds'] * 1000:.0f} "
                f"| {row['tokens_per_second']:.0f} | {row['speed_vs_keras_hub']:.2f}x "
                f"| {row['fraction_of_matmul_peak']:.1%} |"
            )


def banded_table():
    """One row per (file, path, causal): µs per token at each length, and the
    per-token time at the longest length over the banded time at the shortest."""
    for path in results("banded_attention_*.json"):
        result = load(path)
        lengths = sorted({row["length"] for row in result["rows"]})
        environment = " ".join(f"{k}={v}" for k, v in result.get("environment", {}).items())
        details = f"{result.get('layer', '')}, bias {result.get('bias', 'none')}, {result.get('device', 'cpu')}"
        print(f"\n{result['backend']} ({details}) {environment}".rstrip())
        print("| path | mask | " + " | ".join(str(n) for n in lengths) + f" | {lengths[-1]} / {lengths[0]} |")
        print("| --- | --- |" + " ---: |" * (len(lengths) + 1))
        for name in ("banded", "dense"):
            for causal in (True, False):
                rows = {
                    row["length"]: row for row in result["rows"]
                    if row["path"] == name and row["causal"] == causal
                }
                cells = [
                    f"{rows[n]['microseconds_per_token']:.1f}" if n in rows else "—"
                    for n in lengths
                ]
                longest = rows.get(lengths[-1])
                ratio = f"{longest['per_token_vs_banded_shortest']:.2f}" if longest else "—"
                mask = "causal" if causal else "bidirectional"
                print(f"| {name} | {mask} | " + " | ".join(cells) + f" | {ratio} |")


def results(pattern):
    """Result files matching `pattern`, in results/ and its device folders."""
    return sorted(
        glob.glob(os.path.join(RESULTS, pattern)) + glob.glob(os.path.join(RESULTS, "*", pattern))
    )


def fused_widths_table():
    print("\n| backend | device | dtype | model | ms | vs BERT-base |")
    print("| --- | --- | --- | --- | ---: | ---: |")
    for path in results("fused_widths_*.json"):
        result = load(path)
        folder = os.path.dirname(path)
        device = "cpu" if folder == RESULTS else os.path.basename(folder)
        for row in result["rows"]:
            print(
                f"| {result['backend']} | {device} | {result.get('dtype', 'float32')} | {row['model']} "
                f"| {row['seconds'] * 1000:.1f} | {row['time_vs_bert_base']:.2f}x |"
            )


def input_contract_table():
    print("\n| backend | measurement | checked ms | unchecked ms | checked / unchecked |")
    print("| --- | --- | ---: | ---: | ---: |")
    for path in results("input_contract_*.json"):
        result = load(path)
        for row in result["rows"]:
            print(
                f"| {result['backend']} | {row['measurement']} | {row['checked_seconds'] * 1000:.0f} "
                f"| {row['unchecked_seconds'] * 1000:.0f} | {row['checked_vs_unchecked']:.3f} |"
            )


def device_of(path, result):
    """The result's device: its own field, else its folder (h100/), else cpu."""
    folder = os.path.dirname(path)
    return result.get("device") or ("cpu" if folder == RESULTS else os.path.basename(folder))


# The files of `benchmarks/generation.py`'s pretrained shapes.
PRETRAINED_SHAPE_FILES = ("generation_gpt2_t5_", "generation_llama_", "generation_gemma_")


def generation_table():
    """Cached against uncached and keras-hub (tokens per second, batch 8,
    prompt 32, 256 new tokens), then the windowed cache over length."""
    files = [
        (path, load(path)) for path in results("generation_*.json")
        if not os.path.basename(path).startswith(PRETRAINED_SHAPE_FILES)
    ]
    print("\n| backend | device | generator | sampler | tokens/s | how | cached / this |")
    print("| --- | --- | --- | --- | ---: | --- | ---: |")
    for path, result in files:
        cached = {
            row["sampler"]: row["tokens_per_second"] for row in result.get("rows", [])
            if row["generator"] == "keras_attn cached"
        }
        for row in result.get("rows", []):
            how = "measured" if row["method"].startswith("measured") else "estimated"
            print(
                f"| {result['backend']} | {device_of(path, result)} | {row['generator']} "
                f"| {row['sampler']} | {row['tokens_per_second']:.1f} | {how} "
                f"| {cached[row['sampler']] / row['tokens_per_second']:.2f}x |"
            )
        if "keras_hub_error" in result:
            print(f"| {result['backend']} | {device_of(path, result)} | keras-hub GPT2CausalLM "
                  f"| — | — | not run: {result['keras_hub_error']} | — |")
    speeds = {
        (result["backend"], device_of(path, result), row["generator"], row["sampler"]):
            row["tokens_per_second"]
        for path, result in files for row in result.get("rows", [])
    }
    for (backend, device, generator, sampler), speed in sorted(speeds.items()):
        jax_speed = speeds.get(("jax", device, generator, sampler))
        if backend == "torch" and jax_speed and not generator.startswith("uncached"):
            print(f"\ntorch / jax on {device}, {generator} {sampler}: {speed / jax_speed:.2f}x")
    for path, result in files:
        window = result.get("windowed")
        if not window:
            continue
        print(f"\n{result['backend']} on {device_of(path, result)}: {window['model']}, "
              f"attention_window={window['window']}, batch {window['batch']}")
        print("| new tokens | ms/step | µs/token | cache MiB (slots) | peak RSS growth MiB | device peak MiB |")
        print("| ---: | ---: | ---: | ---: | ---: | ---: |")
        for row in window["rows"]:
            device_peak = row.get("device_peak_bytes")
            print(
                f"| {row['new_tokens']} | {row['milliseconds_per_step']:.2f} "
                f"| {row['microseconds_per_token']:.1f} "
                f"| {row['cache_bytes'] / 2**20:.1f} ({row['cache_slots_per_layer']}) "
                f"| {row['peak_rss_growth_bytes'] / 2**20:.0f} "
                f"| {'—' if device_peak is None else f'{device_peak / 2**20:.0f}'} |"
            )


def pretrained_shapes_table():
    """GPT-2 small, T5-small and the LLaMA shape, greedy: keras_attn's
    `generate` against keras-hub's and transformers', measured side by side
    in one run."""
    print("\n| backend | device | model | generator | new tokens | tokens/s | keras_attn / this "
          "| greedy rows equal to keras_attn (first 16 / all) |")
    print("| --- | --- | --- | --- | ---: | ---: | ---: | --- |")
    paths = [path for prefix in PRETRAINED_SHAPE_FILES for path in results(f"{prefix}*.json")]
    for path in paths:
        result = load(path)
        for family, label in (
            ("gpt2", "GPT-2 small"), ("t5", "T5-small"), ("bert", "BERT-base decoder"),
            ("llama", "LLaMA ~100M"), ("gemma", "Gemma 2 ~100M"),
        ):
            shape = result.get(family)
            if not shape:
                continue
            speeds = {row["generator"]: row["tokens_per_second"] for row in shape["rows"]}
            for row in shape["rows"]:
                equal = shape["greedy_rows_equal_to_keras_attn"].get(row["generator"])
                agreement = (
                    " / ".join(f"{value:.0%}" for value in equal.values()) if equal
                    else "—" if row["generator"] == "keras_attn" else "other weights"
                )
                print(
                    f"| {result['backend']} | {device_of(path, result)} | {label} | {row['generator']} "
                    f"| {shape['new_tokens']} | {row['tokens_per_second']:.1f} "
                    f"| {speeds['keras_attn'] / row['tokens_per_second']:.2f}x | {agreement} |"
                )
            if "keras_hub_error" in shape:
                print(f"| {result['backend']} | {device_of(path, result)} | {label} | keras-hub "
                      f"| — | — | — | not run: {shape['keras_hub_error']} |")


if __name__ == "__main__":
    bert_base_table()
    banded_table()
    fused_widths_table()
    input_contract_table()
    generation_table()
    pretrained_shapes_table()
