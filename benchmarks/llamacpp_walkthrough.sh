#!/usr/bin/env bash
# The llama.cpp walk-through of docs/your-server.md, run as a user runs it: the lab's
# llama-server up, measured, its counters read, stopped. Writes
# benchmarks/results/llamacpp_walkthrough.txt (commit, date, then each command and its output;
# this machine's paths shown as $SPECDOCTOR_HOME, $MODELS and $PREFIX).
set -euo pipefail
cd "$(dirname "$0")/.."
out=benchmarks/results/llamacpp_walkthrough.txt
home=$(mktemp -d)
export SPECDOCTOR_HOME=$home COLUMNS=100
models=$(python3 -c "from specdoctor.paths import models_dir; print(models_dir())")
prefix=$(python3 -c "import sys; print(sys.prefix)")
port=8766
{
  echo "llama.cpp walk-through (commit $(git rev-parse --short HEAD), $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores, load $(cut -d' ' -f1 /proc/loadavg))"
  echo
  echo "\$ specdoctor lab up --engine llamacpp --port $port"
  specdoctor lab up --engine llamacpp --port $port 2>/dev/null
  echo
  echo "\$ specdoctor measure --url http://127.0.0.1:$port -n 16 --no-store"
  specdoctor measure --url http://127.0.0.1:$port -n 16 --no-store 2>/dev/null
  echo
  echo "\$ curl -s http://127.0.0.1:$port/metrics | grep '^llamacpp:spec_decode'"
  curl -s http://127.0.0.1:$port/metrics | grep '^llamacpp:spec_decode'
  echo
  echo "\$ specdoctor lab down --port $port"
  specdoctor lab down --port $port
} 2>&1 | sed -e "s#$home#\$SPECDOCTOR_HOME#g" -e "s#$models#\$MODELS#g" -e "s#$prefix#\$PREFIX#g" > "$out"
rm -rf "$home"
cat "$out"
