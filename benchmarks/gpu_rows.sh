#!/usr/bin/env bash
# The GPU rows of docs/speed.md in one run (issue 30): every contender on
# the one GPU, each part in its own process under its own time limit, so
# that one part failing or running long leaves the others' results.
#
#   bash benchmarks/gpu_rows.sh OUTPUT_DIR [SECONDS_PER_PART] [SECONDS_IN_ALL]
#
# Parts run in order of importance; one that would start with less than a
# minute of SECONDS_IN_ALL left is skipped (and listed as skipped).
# PARTS="torch_gpt2 torch_bert_float32" in the environment runs those only.
#
# Needs keras_attn importable (PYTHONPATH or an install), keras, keras-hub,
# JAX with CUDA, a CUDA torch, transformers and pytest. Writes each part's
# JSON and log into OUTPUT_DIR.
set -u
out=${1:?usage: gpu_rows.sh OUTPUT_DIR [SECONDS_PER_PART] [SECONDS_IN_ALL]}
limit=${2:-150}
total=${3:-1800}
mkdir -p "$out"
here=$(cd "$(dirname "$0")" && pwd)
export PYTHONUNBUFFERED=1 TF_CPP_MIN_LOG_LEVEL=3 XLA_PYTHON_CLIENT_PREALLOCATE=false
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > "$out/gpu.txt" 2>&1

part() {  # part NAME BACKEND ARGS...: one benchmark, its log in NAME.log
    local name=$1 backend=$2
    shift 2
    local started=$SECONDS left=$((total - SECONDS))
    if [[ -n ${PARTS:-} && " $PARTS " != *" $name "* ]]; then
        return
    fi
    if ((left < 60)); then
        echo "$name: skipped, $left s left" | tee -a "$out/parts.txt"
        return
    fi
    KERAS_BACKEND=$backend timeout "$((left < limit ? left : limit))" python3 "$@" > "$out/$name.log" 2>&1
    echo "$name: exit $? after $((SECONDS - started)) s" | tee -a "$out/parts.txt"
}

torch_peers=(--models keras_attn "transformers (eager)")
part torch_bert_float32 torch "$here/bert_base.py" "${torch_peers[@]}" --repeats 10 --output "$out"
# `jit_compile=True` (compiled blocks) apart, into its own folder: the
# eager rows above keep their file and survive a compile that runs long.
compiled_peers=(--models "keras_attn (torch.compile)" "transformers (eager)")
part torch_bert_compiled_float32 torch "$here/bert_base.py" "${compiled_peers[@]}" --repeats 10 --output "$out/compiled"
part torch_gpt2 torch "$here/generation.py" --parts gpt2 --no-keras-hub --repeats 3 --output "$out"
# The tests that run only on a CUDA GPU: CUDA-graph replay of the decoding
# step equals the compiled step, one capture per shape (needs pytest).
part torch_gpu_tests torch -m pytest "$here/../tests/torch_runtime/test_step_graph.py" -q -rfE -p no:cacheprovider
part jax_bert_float32 jax "$here/bert_base.py" --repeats 10 --output "$out"
part torch_bert_bfloat16 torch "$here/bert_base.py" "${torch_peers[@]}" --repeats 10 --dtype bfloat16 --output "$out"
part torch_bert_compiled_bfloat16 torch "$here/bert_base.py" "${compiled_peers[@]}" --repeats 10 --dtype bfloat16 --output "$out/compiled"
part jax_gpt2 jax "$here/generation.py" --parts gpt2 --no-keras-hub --repeats 3 --output "$out"
part torch_profile torch "$here/torch_profile.py" --output "$out/torch_profile.txt"
part jax_bert_bfloat16 jax "$here/bert_base.py" --repeats 10 --dtype bfloat16 --output "$out"
# Issue 30, item 5: the attention kernel's share of JAX's gap to keras-hub in
# bfloat16: keras_attn with the fused kernel (cuDNN's flash attention where
# Keras picks it), with its einsum path (as keras-hub computes attention),
# and with Keras' flash attention switched off (XLA's composition).
jax_attention=(--models keras_attn "keras_attn (einsum attention)" keras-hub --repeats 10 --dtype bfloat16)
part jax_bert_bfloat16_attention jax "$here/bert_base.py" "${jax_attention[@]}" --output "$out/attention"
part jax_bert_bfloat16_no_flash jax "$here/bert_base.py" "${jax_attention[@]}" --flash-attention off --output "$out/no_flash"
