#!/usr/bin/env bash
# The GPU rows of docs/speed.md in one run (issues 30 and 50): every
# contender on the one GPU, each part in its own process under its own time
# limit, so that one part failing or running long leaves the others'
# results. Fits one 8-minute turn on one GPU.
#
#   bash benchmarks/gpu_rows.sh OUTPUT_DIR [SECONDS_PER_PART] [SECONDS_IN_ALL]
#
# Parts run in order of importance, each under its own limit (below),
# capped by SECONDS_PER_PART where given and by what is left of
# SECONDS_IN_ALL (default 480); one that would start with less than 30 s
# left is skipped (and listed as skipped):
#   0. torch_gpu_tests: the real CUDA-graph captures of a whole pass and a
#      training step (the tests that skip on a CPU), first: whether the rows
#      below replayed graphs or fell back to eager;
#   1. torch_bert_float32: BERT-base on torch against transformers (eager,
#      SDPA): call and inference at 1x8, 8x128, 2x512, 32x512, the training
#      step (AdamW) at 8x128 and 2x512; then torch_bert_bfloat16, the same
#      rows in bfloat16, and torch_profile_bfloat16_32x512: the kernels of
#      one eager pass of each BERT at 32 x 512 in bfloat16, where the
#      replayed pass's GPU work was twice transformers' (2026-11-28);
#   2. torch_gpt2: greedy GPT-2 small generation against transformers'
#      `generate` (its default and its static cache); keras_attn's warm-up
#      is the first call of a process with empty compile caches;
#      torch_gpt2_second_process: a second process's first call, reusing
#      the caches the first left in one folder (KERAS_ATTN_TORCH_COMPILE_CACHE);
#   3. jax_bert_bfloat16: BERT-base on JAX against keras-hub in bfloat16,
#      inference at 8x128, 2x512, 32x512 and the training step at 8x128;
#      then jax_gpt2;
#   4. torch_gpu_step_tests: the decoding step's CUDA graphs for three
#      generative variants (each compiles, about 35 s on an H200);
#   5. if time is left: the compiled blocks (`jit_compile=True`) against
#      transformers in float32, a torch profile at 8 x 128, JAX in float32.
#   6. serving (issue 53): the engine against static batching and
#      transformers' continuous batching, JAX then torch; by default only if
#      time is left (PARTS="jax_serving torch_serving" runs them alone).
# PARTS="torch_gpt2 torch_gpt2_second_process" in the environment runs those
# only.
#
# Needs keras_attn importable (PYTHONPATH or an install), keras, keras-hub,
# JAX with CUDA, a CUDA torch, transformers and pytest. Writes each part's
# JSON and log into OUTPUT_DIR, and parts.txt: each part's exit status and
# seconds (124: stopped at its limit).
set -u
out=${1:?usage: gpu_rows.sh OUTPUT_DIR [SECONDS_PER_PART] [SECONDS_IN_ALL]}
cap=${2:-600}
total=${3:-480}
mkdir -p "$out"
out=$(cd "$out" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
export PYTHONUNBUFFERED=1 TF_CPP_MIN_LOG_LEVEL=3 XLA_PYTHON_CLIENT_PREALLOCATE=false
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > "$out/gpu.txt" 2>&1

# torch's compile caches, empty at the start of the run and shared by its
# processes (not under OUTPUT_DIR: they are large and machine-specific).
cache=$(mktemp -d "${TMPDIR:-/tmp}/keras_attn_gpu_rows_cache.XXXXXX")
trap 'rm -rf "$cache"' EXIT
unset TORCHINDUCTOR_CACHE_DIR
export KERAS_ATTN_TORCH_COMPILE_CACHE=$cache

part() {  # part NAME SECONDS BACKEND ARGS...: one benchmark, its log in NAME.log
    local name=$1 seconds=$2 backend=$3
    shift 3
    local started=$SECONDS left=$((total - SECONDS))
    if [[ -n ${PARTS:-} && " $PARTS " != *" $name "* ]]; then
        return
    fi
    if ((left < 30)); then
        echo "$name: skipped, $left s left" | tee -a "$out/parts.txt"
        return
    fi
    ((seconds > cap)) && seconds=$cap
    ((seconds > left)) && seconds=$left
    KERAS_BACKEND=$backend timeout -k 10 "$seconds" python3 "$@" > "$out/$name.log" 2>&1
    echo "$name: exit $? after $((SECONDS - started)) s (limit $seconds s)" | tee -a "$out/parts.txt"
}

# 0. The real captures of a whole pass and a training step (two tests that
# run only on a CUDA GPU; on a CPU they skip): the first run of that code
# on a GPU, so whether the rows below ran it or fell back to eager.
tests=$here/../tests/torch_runtime
part torch_gpu_tests 60 torch -m pytest \
    "$tests/test_pass_graph.py::test_real_cuda_graphs_replay_the_eager_pass" \
    "$tests/test_train_graph.py::test_on_gpu_captured_steps_equal_eager_and_dropout_draws_new_masks" \
    -q -rfE -p no:cacheprovider
# 1. BERT-base on torch against transformers, float32 (bfloat16 in 1b).
torch_peers=(--models keras_attn "transformers (eager)" --repeats 10)
torch_rows=(--measurements "call 1x8" "call 8x128" "call 2x512" "call 32x512"
    "inference 1x8" "inference 8x128" "inference 2x512" "inference 32x512"
    "train step 8x128" "train step 2x512")
part torch_bert_float32 100 torch "$here/bert_base.py" "${torch_peers[@]}" "${torch_rows[@]}" --output "$out"
# 1b. The same rows in bfloat16, and where the 32 x 512 pass's GPU time goes.
part torch_bert_bfloat16 90 torch "$here/bert_base.py" "${torch_peers[@]}" "${torch_rows[@]}" --dtype bfloat16 --output "$out"
part torch_profile_bfloat16_32x512 60 torch "$here/torch_profile.py" --shape 32x512 --dtype bfloat16 \
    --decode-tokens 0 --output "$out/torch_profile_bfloat16_32x512.txt"
# 2. GPT-2 small generation: torch with a cold cache, a second torch
# process on the first's caches.
part torch_gpt2 140 torch "$here/generation.py" --parts gpt2 --no-keras-hub --repeats 3 --output "$out"
part torch_gpt2_second_process 75 torch "$here/generation.py" --parts gpt2 --first-call-only --output "$out/second_process"
# 3. JAX against keras-hub in bfloat16, the rows of issue 50 item 5, and
# JAX's generation (torch's is to be within 2x of it).
part jax_bert_bfloat16 90 jax "$here/bert_base.py" --models keras_attn keras-hub --repeats 10 --dtype bfloat16 \
    --measurements "inference 8x128" "inference 2x512" "inference 32x512" "train step 8x128" --output "$out"
part jax_gpt2 75 jax "$here/generation.py" --parts gpt2 --no-keras-hub --repeats 3 --output "$out"
# 4. The decoding step's CUDA graphs for three generative variants (each
# compiles): an encoder's UniLM, a LLaMA and a Gemma 2 (windows, soft caps).
part torch_gpu_step_tests 150 torch -m pytest "$tests/test_step_graph.py" \
    -k "graphed_steps and (bert-unilm or llama-lm or gemma2-lm)" -q -rfE -p no:cacheprovider
# 5. If time is left. `jit_compile=True` (compiled blocks) apart, into its
# own folder: the eager rows above keep their file.
compiled_peers=(--models "keras_attn (torch.compile)" "transformers (eager)" --repeats 10)
part torch_bert_compiled_float32 90 torch "$here/bert_base.py" "${compiled_peers[@]}" \
    --measurements "call 1x8" "inference 8x128" "inference 2x512" "train step 8x128" --output "$out/compiled"
part torch_profile 60 torch "$here/torch_profile.py" --output "$out/torch_profile.txt"
part jax_bert_float32 90 jax "$here/bert_base.py" --models keras_attn keras-hub --repeats 10 --output "$out"
# 6. Serving (issue 53), if time is left, or alone with
# PARTS="jax_serving torch_serving": the LLaMA shape (~100M), 64 requests
# arriving at 16 per second, at most 16 rows, the engine against static
# batching and transformers' continuous batching on the same GPU (the
# engine's torch programs compiled in its warm-up, about 30 s each, and
# static batching's four batch shapes in its own: SECONDS_IN_ALL of 600
# gives torch its 420 s after JAX's 180).
serving=(--models llama --requests 64 --rate 16 --max-batch 16 --output "$out")
part jax_serving 180 jax "$here/serving.py" "${serving[@]}" --output-name serving_jax.json
part torch_serving 420 torch "$here/serving.py" "${serving[@]}" --output-name serving_torch.json
