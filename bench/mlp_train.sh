#!/usr/bin/env bash
# One MLP training step (784-256-256-10, batch 128, float32, SGD): zenith against PyTorch eager
# and JAX jit, in one session. Builds nothing.
#
#   bench/mlp_train.sh PATH/TO/mlp_train [threads] [reps] [steps]
#     (defaults: all CPUs, and the programs' own 15 reps of 20 steps)
#
# Runs the zenith benchmark (bench/mlp_train.cpp) and its peers (bench/mlp_train_peers.py, with
# $PYTHON, default python3; PyTorch and JAX each in a process of its own, so that neither's
# thread pool runs beside the other's) alternately, twice each: zenith, torch, jax, zenith,
# torch, jax, so that a change in the machine's load falls on all of them. Each run reports the
# median ms per step of its timed runs; the table gives both runs' medians, their mean, and the
# ratios of each.
# Progress goes to stderr, the table to stdout; the runs' full output is kept in a temporary
# folder whose path is printed. zenith's matrix products are OpenBLAS's: the environment
# (OPENBLAS_CORETYPE, say) is passed on, and the zenith runs' output names the kernel used.
set -euo pipefail

if [[ $# -lt 1 || ! -x $1 ]]; then
  echo "usage: $0 PATH/TO/mlp_train [threads] [reps] [steps]" >&2
  exit 2
fi
binary=$1
threads=${2:-$(nproc)}
reps=${3:-15}
steps=${4:-20}
python=${PYTHON:-python3}
peers="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/mlp_train_peers.py"
logs=$(mktemp -d "${TMPDIR:-/tmp}/mlp_train.XXXXXX")

for run in 1 2; do
  echo "run $run: zenith ($binary $threads $reps $steps)" >&2
  "$binary" "$threads" "$reps" "$steps" >"$logs/zenith_$run.txt"
  for peer in torch jax; do
    echo "run $run: $peer ($python $peers $threads $reps $steps --only $peer)" >&2
    "$python" "$peers" "$threads" "$reps" "$steps" --only "$peer" >"$logs/${peer}_$run.txt" \
      2>"$logs/${peer}_$run.err"
  done
done
echo "full output: $logs" >&2

# The value of `key` in a run's output (a line `key value`).
value() {
  awk -v k="$2" '$1 == k { v = $2 } END { if (v == "") exit 1; print v }' "$1"
}

declare -A ms
for key in zenith_ms zenith_jit_ms torch_ms jax_ms; do
  src=${key%%_*}
  for run in 1 2; do
    ms[$key,$run]=$(value "$logs/${src}_$run.txt" "$key")
  done
  ms[$key,mean]=$(awk -v a="${ms[$key,1]}" -v b="${ms[$key,2]}" 'BEGIN { print (a + b) / 2 }')
done

# One row: the four medians of a run (or their means) and the three ratios.
row() {
  awk -v name="$1" -v z="${ms[zenith_ms,$2]}" -v zj="${ms[zenith_jit_ms,$2]}" \
    -v t="${ms[torch_ms,$2]}" -v j="${ms[jax_ms,$2]}" \
    'BEGIN { printf "| %s | %.3f | %.3f | %.3f | %.3f | %.2f | %.2f | %.2f |\n",
             name, z, zj, t, j, z / t, z / j, zj / j }'
}

cpu=$(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo 2>/dev/null || true)
blas=$(awk '/^OpenBLAS core:/ { print $3; exit }' "$logs/zenith_1.txt")
echo "MLP train step, 784-256-256-10, batch 128, float32, SGD lr 0.01: median ms per step;" \
  "$threads threads, $reps reps of $steps steps per run${cpu:+; $cpu}; zenith's OpenBLAS" \
  "kernel: $blas"
echo
echo "| | zenith | zenith jit | PyTorch eager | JAX jit | zenith / PyTorch | zenith / JAX |" \
  "zenith jit / JAX |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|"
row "run 1" 1
row "run 2" 2
row "**mean**" mean
