#!/usr/bin/env bash
# The subscription app's Lambda package: this project and what its handler runs, installed for
# Lambda's Python 3.11 on x86_64 into deploy/.build/function/ (the CodeUri of
# deploy/template.yaml), whatever machine runs it. `sam deploy` zips and uploads that folder.
#
#   deploy/build-function.sh          # PYTHON=python3.11 deploy/build-function.sh, etc.
#   deploy/build-function.sh DIR      # the package in DIR instead (the tests build it in a temp)
#   WHEEL=vllm_pr_weekly-….whl deploy/build-function.sh   # ship that wheel of the project (the
#                                     # one CI built and tested, say) instead of building one
#
# - Every version is the one requirements.lock pins: the function runs what CI tested.
# - Without what the function never runs: Pagefind (the archive's search index, made by
#   `publish`), uvicorn (`newsletter serve`'s server), dnspython (email-validator's
#   deliverability check, which the project never asks for) and what only they need; and of
#   botocore's service descriptions, only those of the services the function calls.
# - With bytecode compiled for Python 3.11: Lambda's code folder is read-only, so a module
#   without its .pyc is compiled again at every cold start. The .pyc files are of the
#   unchecked-hash kind: the zip's timestamps do not matter, and the code never changes.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(dirname "$here")"
out="${1:-$here/.build/function}"
work="$out.work"
python="${PYTHON:-python3}"

if ! "$python" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))' 2>/dev/null; then
  echo "build-function.sh: the function runs Python 3.11 and its bytecode is compiled here," \
    "so this needs a Python 3.11: PYTHON=python3.11 deploy/build-function.sh" >&2
  exit 2
fi

if [ -n "${WHEEL:-}" ] && [ ! -f "$WHEEL" ]; then
  echo "build-function.sh: WHEEL=$WHEEL: no such file" >&2
  exit 2
fi
# A folder of something else is never emptied: the argument may be mistyped.
if [ -n "$(ls -A "$out" 2>/dev/null)" ] && ! compgen -G "$out/vllm_pr_weekly-*.dist-info" >/dev/null; then
  echo "build-function.sh: $out is not a function package; not replacing it" >&2
  exit 2
fi
rm -rf "$out" "$work"
mkdir -p "$out" "$work/src"
trap 'rm -rf "$work"' EXIT
pip=("$python" -m pip --disable-pip-version-check --quiet)
lambda_platform=(--platform manylinux2014_x86_64 --implementation cp --python-version 3.11
                 --abi cp311 --only-binary=:all:)

# 1. This project's wheel, unless given: built from a copy of what the build reads, since a
#    build in the tree would pack whatever an earlier build left in build/lib.
if [ -n "${WHEEL:-}" ]; then
  project=("$("$python" -c 'import os, sys; print(os.path.abspath(sys.argv[1]))' "$WHEEL")")
else
  tar -C "$root" --exclude=__pycache__ -cf - pyproject.toml setup.py README.md \
    pipeline subscribers templates | tar -C "$work/src" -xf -
  "${pip[@]}" wheel --no-deps --wheel-dir "$work" "$work/src"
  project=("$work"/vllm_pr_weekly-*.whl)
fi

# 2. What the project with its `lambda` extra needs on Lambda (Amazon Linux 2: glibc 2.26, so
#    manylinux2014 wheels), resolved once, pinned by the lock, nothing installed yet.
"${pip[@]}" install --dry-run --ignore-installed --report "$work/report.json" \
  --target "$work/resolved" "${lambda_platform[@]}" -c "$root/requirements.lock" \
  "${project[0]}[lambda]"

# 3. Those files, minus what never runs there and whatever nothing else then requires.
"$python" - "$work/report.json" >"$work/requirements.txt" <<'PY'
import json
import re
import sys

NEVER_RUNS = {"pagefind", "uvicorn", "dnspython"}


def key(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


chosen = {key(d["metadata"]["name"]): d for d in json.load(open(sys.argv[1]))["install"]}
keep = {name for name, d in chosen.items() if name not in NEVER_RUNS}
while True:  # drop what no kept distribution names (markers ignored: at worst, one too many)
    named = {key(re.match(r"[A-Za-z0-9._-]+", r)[0])
             for name in keep for r in chosen[name]["metadata"].get("requires_dist") or ()}
    unneeded = {name for name in keep if name not in named and not chosen[name]["requested"]}
    if not unneeded:
        break
    keep -= unneeded
for name in sorted(keep):  # the very files resolved: no index is asked again
    if not chosen[name]["requested"]:
        print(f"{chosen[name]['metadata']['name']} @ {chosen[name]['download_info']['url']}")
PY
"${pip[@]}" install --no-compile --no-deps --target "$out" "${lambda_platform[@]}" \
  -r "$work/requirements.txt" "${project[0]}"

# 4. botocore describes some 400 services in 22 MB; the function calls five: the store, the
#    mail, the sign-up queue and the two places a secret may be kept.
for service in "$out"/botocore/data/*/; do
  case "$(basename "$service")" in
    dynamodb | sesv2 | sqs | ssm | secretsmanager) ;;
    *) rm -r "$service" ;;
  esac
done

# 5. The binary modules without their debugging symbols (cryptography's alone carries 3 MB of
#    them), where this machine has GNU strip (not the one of macOS, which reads no ELF).
if strip --version >/dev/null 2>&1; then
  find "$out" -name "*.so" -exec strip --strip-unneeded {} +
else
  echo "build-function.sh: no GNU strip here; the binary modules keep their symbols" >&2
fi

# 6. The bytecode (unchecked-hash: see above), beside each module whatever the environment
#    says (-I: a PYTHONPYCACHEPREFIX would send it elsewhere).
"$python" -I -m compileall -q -j 0 --invalidation-mode unchecked-hash "$out" >/dev/null

size=$("$python" -c 'import os, sys
print(round(sum(os.path.getsize(os.path.join(top, name)) for top, _, names in os.walk(sys.argv[1])
                for name in names) / 1e6, 1))' "$out")
echo "Lambda package: $out ($size MB unpacked; Lambda allows 250 MB)"
