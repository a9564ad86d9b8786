#!/usr/bin/env bash
# One CPU's perf step of ci/aarch64-node, run in the arm64 node by its ordinary user, from the
# clone, as an SVE machine's user runs the A64FX sweep (HARNESS_VENV_ONLY: nothing from apt):
#
#   ci/node/perf-check.sh CONFIG REFUSED_CONFIG|- [ASKED:GRANTED...]
#
# 1. the admin's part (docs/guide/perf.md): perf_event_paranoid 2, through the user's sudo;
# 2. the sweep of CONFIG ends rc 0, and its perf_summary.md has every SVE cell's instructions
#    equal to the QEMU plugins' count of the same cell (up to the per-binary window);
# 3. the sweep of REFUSED_CONFIG fails before it writes anything, naming for each VL asked the VL
#    prctl granted (- where the CPU offers every VL).
# One line per check; exit 0 when all hold. Its results folders stay in the clone.
set -uo pipefail
ME="ci/node/perf-check.sh"
[[ $# -ge 2 ]] || { echo "$ME: usage: $ME CONFIG REFUSED_CONFIG|- [ASKED:GRANTED...]" >&2; exit 2; }
CONFIG=$1 REFUSED=$2
shift 2
FAILED=0
check() {  # check OK|FAIL TEXT
    echo "$ME: $1: $2"
    [[ $1 == ok ]] || FAILED=1
}
results() { .venv/bin/python -c 'import sys, yaml; print(yaml.safe_load(open(sys.argv[1]))["results_dir"])' "$1"; }

echo 2 | sudo -n tee /proc/sys/kernel/perf_event_paranoid >/dev/null \
    || check FAIL "could not set kernel.perf_event_paranoid to 2 with sudo"

t0=$SECONDS
HARNESS_VENV_ONLY=1 ./harness sweep --config "$CONFIG"
rc=$?
[[ $rc -eq 0 ]] && check ok "sweep $CONFIG: rc 0, $((SECONDS - t0)) s" \
    || check FAIL "sweep $CONFIG: rc $rc, $((SECONDS - t0)) s"
summary="$(results "$CONFIG")/perf_summary.md"
# perf_guest_check's tally: "...: E of C cells equal." and a line per differing or uncounted cell.
tally="$(grep -o '[0-9]* of [0-9]* cells equal' "$summary" 2>/dev/null)"
read -r equal _ compared _ <<<"$tally"
if [[ -n "$tally" && "$equal" == "$compared" && "$compared" -gt 0 ]] && ! grep -q '^- \(differs\|no count\):' "$summary"; then
    check ok "$summary: perf's instructions equal the QEMU plugins' on $tally"
else
    check FAIL "$summary: ${tally:-no comparison with the QEMU plugins}$(grep -c '^- \(differs\|no count\):' "$summary" 2>/dev/null | sed 's/^/; cells differing or not counted: /')"
fi
grep -q 'perf on A64FX' "$summary" && check FAIL "$summary names A64FX timing on an emulated node"

[[ $REFUSED != - ]] || exit $FAILED
t0=$SECONDS
log="$(results "$REFUSED").log"
HARNESS_VENV_ONLY=1 ./harness sweep --config "$REFUSED" >"$log" 2>&1
rc=$?
[[ $rc -ne 0 ]] && check ok "sweep $REFUSED: rc $rc (refused), $((SECONDS - t0)) s" \
    || check FAIL "sweep $REFUSED: rc 0, but the CPU does not offer its VLs"
[[ ! -e "$(results "$REFUSED")/raw" ]] && check ok "sweep $REFUSED: no raw file written" \
    || check FAIL "sweep $REFUSED: raw files written: $(results "$REFUSED")/raw"
for pair in "$@"; do
    asked=${pair%:*} granted=${pair#*:}
    line="VL $asked (prctl grants $granted)"  # the perf preflight's line (analysis/backends/perf.py)
    grep -rqF "$line" "$log" "$(results "$REFUSED")/logs" 2>/dev/null && check ok "VL $asked: '$line'" \
        || check FAIL "VL $asked: no '$line' in $log"
done
exit $FAILED
