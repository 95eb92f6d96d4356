#!/usr/bin/env bash
# The wheel is the product: build it as `pip install .` does (from a copy of the project's files, so the
# checkout gets no build/ or *.egg-info), install it with its optional extras into a clean venv (no system
# site-packages, no editable certa), and run every example (specs/*/spec.yaml, from a copy of its folder: the
# examples' data are not in the wheel; those of a served model, which need its server, are skipped) end to end
# from a folder outside the checkout: `certa run` each spec into one ledger (each must PASS), `certa verify`,
# `certa replay --all`, `certa report latest`, `certa site`.
# Quiet unless a step fails (then the step's log is printed); one line per example and the time taken.
# Exit 0 only if every step succeeded.
#   bash .ci/wheel_examples.sh            (KEEP=1 keeps the temporary folder; EXTRAS=... overrides the extras,
#                                          TORCH=... the torch requirement installed with them)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
EXTRAS=${EXTRAS:-postgres,dask,report,models}
# The models extra needs torch, pinned in the same pip command (the example specs/model-perplexity runs two tiny
# models; they are committed, so no make_data step runs here).
TORCH=${TORCH:-torch==2.13.0}
START=$SECONDS
WORK=$(mktemp -d /tmp/certa-wheel.XXXXXX)
LOG="$WORK/step.log"
cleanup() { if [ -z "${KEEP:-}" ]; then rm -rf "$WORK"; else echo "wheel: kept $WORK"; fi; }
trap cleanup EXIT
STEP_PID=
# A time limit from outside (`timeout N bash .ci/wheel_examples.sh`) ends the running step too.
trap 'echo "wheel: interrupted after $((SECONDS - START)) s"; [ -n "$STEP_PID" ] && kill "$STEP_PID" 2>/dev/null; exit 130' INT TERM
unset PYTHONPATH PYTHONHOME VIRTUAL_ENV PIP_REQUIRE_VIRTUALENV
export PIP_NO_INPUT=1 PIP_DISABLE_PIP_VERSION_CHECK=1

# step LIMIT_SECONDS WHAT COMMAND...: run quietly, with a time limit; on failure print its log and stop.
step() {
  local limit=$1 what=$2 rc=0
  shift 2
  : >"$LOG"
  timeout "$limit" "$@" >>"$LOG" 2>&1 &
  STEP_PID=$!
  wait "$STEP_PID" || rc=$?
  STEP_PID=
  if [ "$rc" -ne 0 ]; then
    [ "$rc" -eq 124 ] && what="$what: timed out after $limit s"
    echo "wheel: FAILED (exit $rc): $what, after $((SECONDS - START)) s; its output:"
    tail -n 80 "$LOG" | sed 's/^/  | /'
    exit 1
  fi
}

# The files the next commit would hold (tracked, or new and not ignored): what a fresh clone builds from.
SRC="$WORK/src"
mkdir -p "$SRC"
if git -C "$ROOT" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  (cd "$ROOT" && git ls-files -z --cached --others --exclude-standard \
     | while IFS= read -r -d '' f; do [ -f "$f" ] && printf '%s\0' "$f"; done \
     | xargs -0 cp --parents -t "$SRC")
else
  (cd "$ROOT" && tar --exclude=build --exclude='*.egg-info' --exclude=__pycache__ --exclude=.git -cf - .) \
    | tar -C "$SRC" -xf -
fi

# Build as `pip install .` would: in pip's isolated build environment (setuptools per pyproject.toml).
step 300 "building the wheel" python3 -m pip wheel "$SRC" --no-deps --wheel-dir "$WORK/dist"
WHEEL=$(ls "$WORK"/dist/certa-*.whl)

VENV="$WORK/venv"
step 120 "creating a clean venv" python3 -m venv "$VENV"
step 1500 "installing $(basename "$WHEEL")[$EXTRAS] $TORCH" "$VENV/bin/python" -m pip install "$TORCH" "$WHEEL[$EXTRAS]"
export PATH="$VENV/bin:$PATH"
RUN="$WORK/run"
mkdir -p "$RUN"
cp -r "$SRC/specs" "$RUN/specs"
cd "$RUN"
# certa must come from the wheel in the venv, never from the checkout or an editable install.
step 60 "certa imported from outside the venv" "$VENV/bin/python" -c "
import sys, certa
from certa import cli, engine, ledger, schemas
prefix = sys.prefix.rstrip('/') + '/'
stray = [m.__file__ for m in (certa, cli, engine, ledger, schemas) if not m.__file__.startswith(prefix)]
sys.exit('certa imported from outside the venv: %s' % stray if stray else 0)"
[ "$(command -v certa)" = "$VENV/bin/certa" ] || { echo "wheel: FAILED: certa is $(command -v certa)"; exit 1; }
echo "wheel: built and installed $(basename "$WHEEL")[$EXTRAS] in a clean venv ($((SECONDS - START)) s)"

# An example of a served model (an endpoint: input) needs its server, which is still starting while this runs:
# tests/served/test_served_examples.py runs it against the test server.
SERVED=$("$VENV/bin/python" "$SRC/.ci/served_specs.py" specs/*/spec.yaml)
RUNS=0
for spec in specs/*/spec.yaml; do
  example=$(basename "$(dirname "$spec")")
  if grep -qxF "$spec" <<<"$SERVED"; then
    echo "wheel: example $example skipped: it scores a served model (tests/served/test_served_examples.py runs it)"
    continue
  fi
  t0=$SECONDS
  step 600 "certa run $spec (exit 1: FAIL verdict, 2: invalid, 3: aborted; the example must PASS)" \
    certa run "$spec"
  RUNS=$((RUNS + 1))
  echo "wheel: example $example PASS ($((SECONDS - t0)) s)"
done
t0=$SECONDS
step 300 "certa verify" certa verify
step 900 "certa replay --all" certa replay --all
echo "wheel: verify and replay --all of $RUNS runs: intact, all REPRODUCED ($((SECONDS - t0)) s)"
t0=$SECONDS
step 300 "certa report latest" certa report latest -o "$RUN/latest.html"
step 600 "certa site" certa site -o "$RUN/site"
[ -s "$RUN/latest.html" ] && [ -s "$RUN/site/index.html" ] \
  || { echo "wheel: FAILED: report or site index missing or empty"; ls -R "$RUN/site" | head -20; exit 1; }
echo "wheel: report latest and site written ($((SECONDS - t0)) s)"
echo "wheel: examples end to end from the installed wheel: OK in $((SECONDS - START)) s"
