#!/usr/bin/env bash
# ci/aarch64-node's armie step, run in the arm64 node by its ordinary user, from the clone, as an
# SVE machine's user counts with the armie backend's stand-in natively:
#
#   ci/node/armie-check.sh CONFIG [DYNAMORIO_HOME]
#
# 1. ./harness setup --with-dynamorio: DynamoRIO with the ROI client on the node, from
#    DYNAMORIO_HOME (an AArch64 DynamoRIO tree, as DynamoRIO's release is) when given, else built
#    from source on the node;
# 2. the sweep of CONFIG (backends: [qemu, armie], armie: {via: native}) ends rc 0;
# 3. its summary.md has every armie cell's ROI total and SVE count equal to the QEMU plugins', and
#    its provenance.csv names DynamoRIO natively as the armie rows' evidence.
# One line per check; exit 0 when all hold. Its results folder stays in the clone.
set -uo pipefail
ME="ci/node/armie-check.sh"
[[ $# -ge 1 ]] || { echo "$ME: usage: $ME CONFIG [DYNAMORIO_HOME]" >&2; exit 2; }
CONFIG=$1 HOME_GIVEN=${2:-}
FAILED=0
check() {  # check OK|FAIL TEXT
    echo "$ME: $1: $2"
    [[ $1 == ok ]] || FAILED=1
}

t0=$SECONDS
if [[ -n "$HOME_GIVEN" ]]; then DYNAMORIO_HOME=$HOME_GIVEN ./harness setup --with-dynamorio; else ./harness setup --with-dynamorio; fi
rc=$?
[[ $rc -eq 0 ]] && check ok "setup --with-dynamorio${HOME_GIVEN:+ (DYNAMORIO_HOME=$HOME_GIVEN)}: rc 0, $((SECONDS - t0)) s" \
    || { check FAIL "setup --with-dynamorio: rc $rc, $((SECONDS - t0)) s"; exit 1; }

t0=$SECONDS
./harness sweep --config "$CONFIG"
rc=$?
[[ $rc -eq 0 ]] && check ok "sweep $CONFIG: rc 0, $((SECONDS - t0)) s" || check FAIL "sweep $CONFIG: rc $rc, $((SECONDS - t0)) s"
results=$(.venv/bin/python -c 'import sys, yaml; print(yaml.safe_load(open(sys.argv[1]))["results_dir"])' "$CONFIG")
# armie.report's tally: "...: E of C cells equal." and a line per differing or uncounted cell.
tally="$(grep -o 'DynamoRIO natively vs QEMU plugins, ROI total and SVE count per cell: [0-9]* of [0-9]* cells equal' \
         "$results/summary.md" 2>/dev/null)"
read -r equal _ compared _ <<<"${tally##*cell: }"
if [[ -n "$tally" && "$equal" == "$compared" && "$compared" -gt 0 ]] && ! grep -q '^- \(differs\|no count\):' "$results/summary.md"; then
    check ok "$results/summary.md: $tally"
else
    check FAIL "$results/summary.md: ${tally:-no comparison of DynamoRIO natively with the QEMU plugins}$(grep '^- \(differs\|no count\):' "$results/summary.md" 2>/dev/null | head -n 3 | sed 's/^/; /' | tr -d '\n')"
fi
evidence=$(.venv/bin/python -c 'import sys, pandas as pd; p = pd.read_csv(sys.argv[1]); print(",".join(sorted(set(p[p.backend == "armie"].evidence))))' \
           "$results/provenance.csv" 2>/dev/null)
[[ "$evidence" == "DynamoRIO natively" ]] && check ok "$results/provenance.csv: the armie rows' evidence is '$evidence'" \
    || check FAIL "$results/provenance.csv: the armie rows' evidence is '${evidence:-(none)}', not 'DynamoRIO natively'"
exit $FAILED
