#!/usr/bin/env bash
# Set up a fresh machine: Debian packages, a virtualenv at .venv, the project and its tools.
# Safe to re-run; the README's two commands start with it.
set -euo pipefail
cd "$(dirname "$0")/.."

# lld-19 links FlyDSL's gfx950 code objects when ROCm is absent (kernels/flydsl_gfx950/toolchain.py);
# chromium renders the published asv HTML in the tests (its JavaScript libraries are committed in
# ci/history/vendor/); shellcheck lets actionlint check the workflows' shell steps
# (tests/test_workflows.py) on every machine alike; gh (the GitHub CLI) is how ci.notify posts, and
# openssl makes the certificate of the local GitHub stand-in it is tested against (tests/fake_github.py).
packages=()
for pkg in lld-19 chromium shellcheck gh openssl; do dpkg -s "$pkg" >/dev/null 2>&1 || packages+=("$pkg"); done
if [ ${#packages[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "setup: apt-get install ${packages[*]}" >&2
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${packages[@]}" >/dev/null
  else
    echo "setup: missing Debian packages ${packages[*]} (need root and apt-get); continuing" >&2
  fi
fi

# A GPU runner keeps its own CUDA/ROCm build of torch and triton (system site-packages);
# a machine without one gets the pinned CPU stack from ci/constraints-cpu.txt.
if command -v nvidia-smi >/dev/null || [ -e /dev/kfd ]; then
  [ -d .venv ] || python3 -m venv --system-site-packages .venv
  .venv/bin/python -m pip install -q -e ".[test]"
else
  [ -d .venv ] || python3 -m venv .venv
  .venv/bin/python -m pip install -q -c ci/constraints-cpu.txt torch
  .venv/bin/python -m pip install -q -c ci/constraints-cpu.txt -e ".[test]"
fi
# The checkout root on the venv's path (a .pth, what an editable install writes): harness/,
# ci/ and asv_bench/ import from any directory. asv's environments do not inherit it.
site=$(.venv/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
printf '%s\n' "$PWD" > "$site/mxfp4_checkout.pth"
echo "setup: ready ($(.venv/bin/python -c 'import torch, triton, flydsl; print("torch", torch.__version__, "triton", triton.__version__, "flydsl", getattr(flydsl, "__version__", "?"))'))" >&2
