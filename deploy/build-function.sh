#!/usr/bin/env bash
# The subscription app's Lambda package: this project and what its handler runs, installed for
# Lambda's Python 3.11 on x86_64 into deploy/.build/function/ (the CodeUri of
# deploy/template.yaml), whatever machine runs it. `sam deploy` zips and uploads that folder.
#
#   deploy/build-function.sh          # PYTHON=python3.11 deploy/build-function.sh, etc.
#   deploy/build-function.sh DIR      # the package in DIR instead (the tests build it in a temp)
#
# - Every version is the one requirements.lock pins: the function runs what CI tested.
# - Without what the function never runs: Pagefind and rjieba (the archive's search index,
#   made by `publish`), uvicorn (`newsletter serve`'s server), dnspython (email-validator's
#   deliverability check, which the project never asks for) and what only they need; and of
#   botocore's service descriptions, only those of the services the function calls.
# - With bytecode compiled for Python 3.11: Lambda's code folder is read-only, so a module
#   without its .pyc is compiled again at every cold start. The .pyc files are of the
#   unchecked-hash kind: the zip's timestamps do not matter, and the code never changes.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(dirname "$here")"
out="${1:-$here/.build/function}"
out="${out%/}"
python="${PYTHON:-python3}"

if ! "$python" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))' 2>/dev/null; then
  echo "build-function.sh: the function runs Python 3.11 and its bytecode is compiled here," \
    "so this needs a Python 3.11: PYTHON=python3.11 deploy/build-function.sh" >&2
  exit 2
fi

# A folder of something else is never emptied: the argument may be mistyped.
if [ -n "$(ls -A "$out" 2>/dev/null)" ] && ! compgen -G "$out/vllm_pr_weekly-*.dist-info" >/dev/null; then
  echo "build-function.sh: $out is not a function package; not replacing it" >&2
  exit 2
fi
# Built aside (beside the package, so that moving it in is a rename), in place only once
# whole: a failed build (no network, a full disk) leaves the last package, never half of one.
mkdir -p "$(dirname "$out")"
work=$(mktemp -d "$(dirname "$out")/.function-build.XXXXXX")
trap 'rm -rf "$work"' EXIT
package="$work/package"
mkdir "$package"

# 1. This project's wheel, built as `pip install .` builds it (scripts/python-deps).
PYTHON="$python" "$root/scripts/python-deps" wheel "$work"
project=("$work"/vllm_pr_weekly-*.whl)

# 2. What the project with its `lambda` extra needs on Lambda (Amazon Linux 2: glibc 2.26, so
#    manylinux2014 wheels), pinned by the lock, installed aside first.
PYTHON="$python" "$root/scripts/python-deps" for-lambda "$work/all" "${project[0]}[lambda]"

# 3. Into the package, all of it but what never runs there and whatever nothing else then
#    requires, file by file as each distribution's RECORD lists them.
"$python" - "$work/all" "$package" <<'PY'
import re
import shutil
import sys
from importlib.metadata import distributions
from pathlib import Path

NEVER_RUNS = {"pagefind", "rjieba", "uvicorn", "dnspython"}


def key(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


installed, out = map(Path, sys.argv[1:])
found = {key(d.metadata["Name"]): d for d in distributions(path=[str(installed)])}
keep = set(found) - NEVER_RUNS
while True:  # drop what no kept distribution names (markers ignored: at worst, one too many)
    named = {key(re.match(r"[A-Za-z0-9._-]+", r)[0]) for n in keep for r in found[n].requires or ()}
    unneeded = {n for n in keep if n not in named and n != "vllm-pr-weekly"}
    if not unneeded:
        break
    keep -= unneeded
for name in keep:
    for file in found[name].files or ():
        if file.parts[0] not in ("..", "bin"):  # console scripts: the function runs none
            (out / file).parent.mkdir(parents=True, exist_ok=True)
            shutil.move(installed / file, out / file)
PY

# 4. botocore describes some 400 services in 22 MB; the function calls five: the store, the
#    mail, the sign-up queue and the two places a secret may be kept.
for service in "$package"/botocore/data/*/; do
  case "$(basename "$service")" in
    dynamodb | sesv2 | sqs | ssm | secretsmanager) ;;
    *) rm -r "$service" ;;
  esac
done

# 5. The binary modules without their debugging symbols (cryptography's alone carries 3 MB of
#    them), where this machine's GNU strip reads them: an x86_64 one (macOS's strip reads no
#    ELF, another architecture's no x86_64 ELF).
if [ "$(uname -m)" = x86_64 ] && strip --version >/dev/null 2>&1; then
  # Only a file no other path shares: a hard link would carry the change elsewhere.
  find "$package" -name "*.so" -links 1 -exec strip --strip-unneeded {} +
else
  echo "build-function.sh: no GNU strip here; the binary modules keep their symbols" >&2
fi

# 6. The bytecode (unchecked-hash: see above), beside each module whatever the environment
#    says (-I: a PYTHONPYCACHEPREFIX would send it elsewhere).
"$python" -I -m compileall -q -j 0 --invalidation-mode unchecked-hash "$package" >/dev/null

if [ -e "$out" ]; then
  mv "$out" "$work/previous"  # removed with the rest of $work on exit
fi
mv "$package" "$out"
out=$(cd "$out" && pwd)
size=$("$python" -c 'import os, sys
print(round(sum(os.path.getsize(os.path.join(top, name)) for top, _, names in os.walk(sys.argv[1])
                for name in names) / 1e6, 1))' "$out")
echo "Lambda package: $out ($size MB unpacked; Lambda allows 250 MB)"
