#!/usr/bin/env bash
# The done-when demo of `specdoctor sweep`: on the lab (real vLLM on CPU), one command benchmarks
# ngram and draft_model at two values of k against the speculation-off baseline (5 boots) and
# writes the report. Output: benchmarks/results/lab_sweep.{json,txt} and lab_sweep_report/.
#
#   bash benchmarks/lab_sweep.sh            # ~15 min on an idle 2-core machine
set -euo pipefail
cd "$(dirname "$0")/.."
out=benchmarks/results
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# the store outlives this script: a run cut short is finished with
#   specdoctor sweep --resume RUN_ID --db "$db"
db=${LAB_SWEEP_DB:-${SPECDOCTOR_HOME:-$HOME/.cache/specdoctor}/lab_sweep.db}
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}"
{
  echo "# commit $(git rev-parse --short HEAD), $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "# specdoctor sweep --lab --method ngram,draft_model --k 2,4 -n 8 --suite code,essay --sampling greedy -c 1,4 --max-tokens 48"
} > "$out/lab_sweep.txt"
python3 -m specdoctor sweep --lab --method ngram,draft_model --k 2,4 -n 8 --suite code,essay \
  --sampling greedy -c 1,4 --max-tokens 48 --db "$db" \
  --report-dir "$out/lab_sweep_report" --json > "$work/out.json"
python3 -m json.tool "$work/out.json" > "$out/lab_sweep.json"
python3 -m specdoctor report "$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["run_id"])' "$work/out.json")" \
  --db "$db" --out "$out/lab_sweep_report" >/dev/null
# the console face of the same run, for reading
python3 - "$work/out.json" >> "$out/lab_sweep.txt" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
for r in d["rows"]:
    sp = f"{r['speedup']:.2f}x" if r["speedup"] else "-"
    al = r["mean_acceptance_length"]
    print(f"{r['config']:<16} {r['cell']:<16} {r['status']:<7} AL {al if al is not None else '-':<7} "
          f"tok/s {r['tok_s']['value'] if r['tok_s'] else '-':<9} speedup {sp}")
for v in d["verdicts"]:
    print(f"{v['cell']}: best {v['winner']}")
    for s in v["sentences"]:
        print(f"  {s}")
    print(f"  command: {v['command']}")
PY
cat "$out/lab_sweep.txt"
# the results name no home directory
grep -rlF "$HOME" "$out/lab_sweep.txt" "$out/lab_sweep.json" "$out/lab_sweep_report" 2>/dev/null \
  | while read -r f; do case "$f" in *.png) ;; *) sed -i "s#$HOME#~#g" "$f" ;; esac; done
