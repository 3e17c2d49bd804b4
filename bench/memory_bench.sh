#!/usr/bin/env bash
# Issue 24's memory-order benchmark in one run: bench/memory_bench over the
# zoo (inception_v3, squeezenet, nasnet, randwire), the Serenity paper's kind
# of graphs (RandWire CIFAR-10/100 with seeds 1..5, DARTS cell and ImageNet
# network) and the ONNX files under tests/data/onnx, under both memory models
# (plan: what ios-run allocates; per-node: the paper's), at the default
# budgets unless options are given (they go to memory_bench as they are);
# with identity graph rewriting judged by the least-peak order (NASNet's
# takes about a minute per memory model; --no-rewrite skips it).
# Prints the machine, the date and the load before and after, since the
# timings depend on them. Results go to docs/benchmarks.md by hand.
#
#   bash bench/memory_bench.sh [--max-part N] [--states N] [--steps N] [--step-seconds S] [--parts]
#       [--no-rewrite]
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN="${BIN:-$ROOT/build}"
[[ -x "$BIN/bench/memory_bench" ]] || {
  echo "memory_bench.sh: build bench/memory_bench first (cmake --build build --target memory_bench)" >&2
  exit 2
}
models=(inception_v3 squeezenet nasnet randwire)
for seed in 1 2 3 4 5; do models+=("randwire_cifar10:s=$seed"); done
for seed in 1 2 3 4 5; do models+=("randwire_cifar100:s=$seed"); done
models+=(darts_cell darts_imagenet)
models+=("$ROOT"/tests/data/onnx/*.onnx)
echo "# $(date -u +%FT%TZ) on $(nproc) cores ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //')), load before: $(cut -d' ' -f1-3 /proc/loadavg)"
"$BIN/bench/memory_bench" "$@" "${models[@]}" | sed "s|$ROOT/||"
echo "# load after: $(cut -d' ' -f1-3 /proc/loadavg)"
