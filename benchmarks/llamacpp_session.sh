#!/usr/bin/env bash
# A llama.cpp session as a user runs it, every command against llama-server started from its
# own command line: bench with the spec-off baseline, a sweep over k and --spec-draft-p-min,
# a saved baseline and a gate of a candidate whose drafter KV cache is q4_0, and diagnose of
# the healthy pair and of the same launch without --spec-type. The pair: the llama.cpp lab's
# trained target (f32 GGUF) and its small trained drafter (f32 GGUF), as `specdoctor lab up
# --engine llamacpp --target trained --draft small` serves them. Writes
# benchmarks/results/llamacpp_session.txt (commit, date, load, then each command and its
# output; this machine's paths shown as $MODELS and $PREFIX).
set -euo pipefail
cd "$(dirname "$0")/.."
out=benchmarks/results/llamacpp_session.txt
home=$(mktemp -d)
# the lab's models where they are (a fresh home would train them again), the store apart
models=$(python3 -c "from specdoctor.paths import models_dir; print(models_dir())")
export SPECDOCTOR_MODELS=$models SPECDOCTOR_HOME=$home COLUMNS=100
prefix=$(python3 -c "import sys; print(sys.prefix)")
# the launch command, as lab up would start it (minus --port: each command picks a free one)
cmd=$(python3 - <<'PY'
import shlex
from specdoctor.launch import argv as A
from specdoctor.lab import llamacpp
plan = llamacpp.plan(llamacpp.LlamaCppRequest(target="trained", draft="small"))
print(" ".join(shlex.quote(a) for a in A.drop(plan.spec.argv, "--port")))
PY
)
q4="$cmd --spec-draft-type-k q4_0 --spec-draft-type-v q4_0"
notype=$(echo "$cmd" | sed -e 's/ --spec-type draft-simple//')
run() { echo "\$ $*" | sed -e "s#$cmd#\$CMD#" ; "$@" 2>&1 || echo "(exit $?)"; echo; }
{
  echo "llama.cpp session (commit $(git rev-parse --short HEAD)$(git diff --quiet HEAD -- src || echo +dirty), $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores, load $(cut -d' ' -f1 /proc/loadavg))"
  echo "CMD = $cmd"
  echo
  run specdoctor bench --launch "$cmd" --baseline --suite code --sampling greedy,official -c 1 -n 16 --no-report
  run specdoctor sweep --launch "$cmd" --k 2,4 --flag spec-draft-p-min=0,0.75 --suite code --sampling greedy -c 1 -n 16 --no-report
  run specdoctor gate --save healthy
  run specdoctor gate --baseline healthy --launch "$q4"
  run specdoctor diagnose --launch "$cmd" -o "$home/diag1"
  run specdoctor diagnose --launch "$notype" -o "$home/diag2"
} 2>&1 | sed -e "s#$home#\$SPECDOCTOR_HOME#g" -e "s#$models#\$MODELS#g" -e "s#$prefix#\$PREFIX#g" > "$out"
rm -rf "$home"
cat "$out"
