#!/bin/sh
# The complexity ratchet: no function of the library's hosts (backends/), the
# tool (bench/tool/), MPI (mpi/) or the Python package (python/src/) may have a
# cyclomatic complexity (lizard's CCN) above 40, except the ones listed in
# .ci/complexity-allowlist.txt with their current CCN. The list only shrinks:
# the gate fails when
#   - a function not listed is above 40 (split it: tables, steps, helpers);
#   - a listed function's CCN is not the listed one (higher: it grew, undo or
#     split; lower: write the new figure in the list, so it cannot grow back);
#   - a listed function is gone or at 40 or below (delete its line).
# The kernels (kernels_*/) and the tests are not measured.
#
#   .ci/check-complexity.sh            the gate (git-tracked sources only)
#   .ci/check-complexity.sh --list     every measured function above 40, in the
#                                      list's format (to write the list anew)
#   LIZARD=/path/to/lizard .ci/check-complexity.sh
#   COMPLEXITY_ALLOWLIST=FILE          another list (the gate's own tests)
#
# lizard (PyPI; pinned below, as another version may count differently) comes
# from $LIZARD, else a virtual environment under build/ that this script makes
# and reuses (python3 with its venv module, and PyPI, are needed the first
# time). Exits 0 when clean, 1 on a finding, 2 when lizard cannot be had or
# this is not a git checkout. Takes a few seconds.
set -eu
LIZARD_VERSION=1.24.3
LIMIT=40
case ${1:-} in
--list) mode=list ;;
"") mode=gate ;;
*)
    echo "usage: $0 [--list]" >&2
    exit 2
    ;;
esac
root=$(git rev-parse --show-toplevel 2>/dev/null) || {
    echo "check-complexity: not inside a git checkout" >&2
    exit 2
}
cd "$root"
list=${COMPLEXITY_ALLOWLIST:-.ci/complexity-allowlist.txt}
liz=${LIZARD:-}
py=python3
if [ -z "$liz" ]; then
    venv=build/lizard-venv
    liz=$venv/bin/lizard
    py=$venv/bin/python
    if ! "$liz" --version 2>/dev/null | grep -qx "$LIZARD_VERSION"; then
        echo "check-complexity: installing lizard $LIZARD_VERSION into $venv (PyPI)"
        if ! { [ -x "$py" ] || python3 -m venv "$venv"; } ||
            ! PIP_DISABLE_PIP_VERSION_CHECK=1 "$py" -m pip install -q "lizard==$LIZARD_VERSION"; then
            echo "check-complexity: cannot install lizard (needs python3, its venv module and" \
                "PyPI; or set LIZARD)" >&2
            exit 2
        fi
    fi
fi
if ! "$liz" --version >/dev/null 2>&1; then
    echo "check-complexity: cannot run lizard: $liz" >&2
    exit 2
fi
# (the tracked sources' paths hold no spaces)
# shellcheck disable=SC2046
set -- $(git ls-files -- 'backends/*.c' 'backends/*.h' 'bench/tool/*.c' 'bench/tool/*.h' \
    'mpi/*.c' 'mpi/*.h' 'python/src/*.py')
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
"$liz" -l cpp -l python --csv "$@" >"$tmp"
exec "$py" - "$tmp" "$list" "$LIMIT" "$mode" <<'PY'
import csv, sys

csv_path, list_path, limit, mode = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
# CSV columns: NLOC, CCN, tokens, params, length, location, file, function, long name, start, end
measured = {}
for row in csv.reader(open(csv_path, newline="")):
    if len(row) < 8 or not row[1].isdigit():
        continue
    key = (row[6], row[7])
    measured[key] = max(int(row[1]), measured.get(key, 0))
over = {k: v for k, v in measured.items() if v > limit}
if mode == "list":
    for (f, fn), ccn in sorted(over.items()):
        print(f"{ccn:4d}  {f}  {fn}")
    sys.exit(0)
listed, bad = {}, []
for n, line in enumerate(open(list_path), 1):
    line = line.split("#", 1)[0].strip()
    if not line:
        continue
    parts = line.split()
    if len(parts) != 3 or not parts[0].isdigit():
        bad.append(f"{list_path}:{n}: not 'CCN FILE FUNCTION': {line}")
        continue
    key = (parts[1], parts[2])
    if key in listed:
        bad.append(f"{list_path}:{n}: {parts[1]} {parts[2]} listed twice")
    listed[key] = int(parts[0])
for key, ccn in sorted(over.items()):
    if key not in listed:
        bad.append(f"{key[0]}: {key[1]}: CCN {ccn} > {limit} (split it; the allowlist takes no new entries)")
for key, was in sorted(listed.items()):
    now = measured.get(key)
    if now is None:
        bad.append(f"{key[0]}: {key[1]}: listed (CCN {was}) but not found: delete its line in {list_path}")
    elif now <= limit:
        bad.append(f"{key[0]}: {key[1]}: CCN {now} <= {limit} now: delete its line in {list_path}")
    elif now > was:
        bad.append(f"{key[0]}: {key[1]}: CCN {now}, listed {was}: it grew (undo or split)")
    elif now < was:
        bad.append(f"{key[0]}: {key[1]}: CCN {now}, listed {was}: write {now} in {list_path}")
for b in bad:
    print(b)
print(f"check-complexity: {len(measured)} functions measured, {len(over)} above CCN {limit}, "
      f"{len(listed)} listed: {len(bad)} finding{'s' if len(bad) != 1 else ''}")
sys.exit(1 if bad else 0)
PY
