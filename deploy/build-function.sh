#!/usr/bin/env bash
# The subscription app's Lambda package: this project with its `lambda` extra, installed for
# Lambda's Python 3.11 on x86_64 into deploy/.build/function/ (the CodeUri of
# deploy/template.yaml), whatever machine runs it. `sam deploy` zips and uploads that folder.
#
#   deploy/build-function.sh          # PYTHON=python3.12 deploy/build-function.sh, etc.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(dirname "$here")"
out="$here/.build/function"
wheels="$here/.build/wheels"
python="${PYTHON:-python3}"

rm -rf "$out" "$wheels"
mkdir -p "$out" "$wheels"

# 1. A wheel of this project, and of every dependency, built or fetched for this machine.
#    Only the pure-Python ones (py3-none-any) are of use below: they include this project
#    and any dependency published as source only (feedparser's sgmllib3k).
"$python" -m pip wheel --quiet --disable-pip-version-check --wheel-dir "$wheels" "$root[lambda]"
project=("$wheels"/vllm_pr_weekly-*.whl)

# 2. Everything for Lambda (Amazon Linux 2: glibc 2.26, so manylinux2014 wheels): the pure
#    wheels of step 1, binary wheels (cryptography, mjml-python, pendulum, nh3, …) from
#    PyPI. The project is named by its file, so no index is ever asked for it.
"$python" -m pip install --quiet --disable-pip-version-check --no-compile --no-warn-conflicts \
  --target "$out" --find-links "$wheels" \
  --platform manylinux2014_x86_64 --implementation cp --python-version 3.11 --abi cp311 \
  --only-binary=:all: "${project[0]}[lambda]"

rm -rf "$wheels"
echo "Lambda package: $out ($(du -sh "$out" | cut -f1) unpacked; Lambda allows 250 MB)"
