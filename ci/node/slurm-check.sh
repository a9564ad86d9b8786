#!/usr/bin/env bash
# ci/aarch64-node's slurm step, run in the arm64 node by its ordinary user, from the clone: the
# A64FX sweep through a local Slurm on the node, as an A64FX user runs it through the site's:
#
#   ci/node/slurm-check.sh CONFIG
#
# 1. the admin's part: perf_event_paranoid 2, and `./harness setup --with-slurm` (slurm-wlm and
#    munge through the apt guard, a one-node Slurm started through the user's sudo), whose node
#    has the CPUs the node has (sinfo against nproc);
# 2. HARNESS_VENV_ONLY=1 ./harness sweep --config CONFIG --slurm a64fx ... from an empty build
#    and results folder ends rc 0;
# 3. its perf measurements ran exclusive and alone, by Slurm's records (ci/node/exclusive-jobs);
# 4. the same sweep without Slurm, on the same binaries, into another results folder, ends rc 0;
# 5. the two folders' counts.csv and perf.csv are equal (ci/node/compare-tables).
# One line per check; exit 0 when all hold. Its folders stay in the clone: build-node-slurm,
# RESULTS-slurm and RESULTS-local (RESULTS: CONFIG's results_dir).
set -uo pipefail
ME="ci/node/slurm-check.sh"
[[ $# -eq 1 && -f $1 ]] || { echo "$ME: usage: $ME CONFIG (a sweep file with a perf section)" >&2; exit 2; }
CONFIG=$1
FAILED=0
check() {  # check OK|FAIL TEXT
    echo "$ME: $1: $2"
    [[ $1 == ok ]] || FAILED=1
}
BUILD=build-node-slurm
sweep() {  # sweep RESULTS LOG [ARGS...]: the sweep of CONFIG into RESULTS; its output also in LOG
    local out=$1 log=$2
    shift 2
    HARNESS_VENV_ONLY=1 ./harness sweep --config "$CONFIG" --set "results_dir=$out" --set "build_dir=$BUILD" "$@" 2>&1 \
        | tee "$log"
    return "${PIPESTATUS[0]}"
}

echo 2 | sudo -n tee /proc/sys/kernel/perf_event_paranoid >/dev/null \
    || check FAIL "could not set kernel.perf_event_paranoid to 2 with sudo"
t0=$SECONDS
./harness setup --with-slurm
rc=$?
[[ $rc -eq 0 ]] && check ok "./harness setup --with-slurm: rc 0, $((SECONDS - t0)) s" \
    || { check FAIL "./harness setup --with-slurm: rc $rc"; exit 1; }
node="$(sinfo -h -p harness -o '%N %c CPUs %m MB %t')"
[[ "$(sinfo -h -p harness -o %c)" == "$(nproc --all)" ]] && check ok "the node's Slurm: $node, as nproc says" \
    || check FAIL "the node's Slurm: $node; nproc --all says $(nproc --all)"

results="$(.venv/bin/python -c 'import sys, yaml; print(yaml.safe_load(open(sys.argv[1]))["results_dir"])' "$CONFIG")"
ON_SLURM="$results-slurm" LOCAL="$results-local"
rm -rf "$BUILD" "$ON_SLURM" "$LOCAL"
mkdir -p "$(dirname "$ON_SLURM")"
t0=$SECONDS
# The A64FX profile asks for an account and a partition: this Slurm keeps no accounts (any name
# is taken) and has one partition.
sweep "$ON_SLURM" "$ON_SLURM.log" --slurm a64fx --slurm-account harness --slurm-partition harness
rc=$?
[[ $rc -eq 0 ]] && check ok "sweep $CONFIG --slurm a64fx: rc 0, $((SECONDS - t0)) s" \
    || check FAIL "sweep $CONFIG --slurm a64fx: rc $rc, $((SECONDS - t0)) s (log: $ON_SLURM.log)"
# What of the A64FX profile this node cannot give (the harness's own line), said, not faked.
fitted="$(grep -m1 '^slurm: the profile a64fx asks more than' "$ON_SLURM.log")"
[[ -z "$fitted" ]] || echo "$ME: not applicable here: A64FX's 48-core, 28 GB nodes; ${fitted#slurm: }"
run_id="$(grep -m1 -o '^SLURM run ID: \S*' "$ON_SLURM.log" | cut -d' ' -f4)"
planned="$(grep -m1 -o '^perf: [0-9]* measurement jobs' "$ON_SLURM.log" | cut -d' ' -f2)"
if ci/node/exclusive-jobs "${run_id:-?}" "${planned:-?}"; then
    check ok "every measurement job of run ${run_id:-?} ran exclusive and alone (scontrol show job)"
else
    check FAIL "measurement jobs of run ${run_id:-?}: not all exclusive and alone (lines above)"
fi

t0=$SECONDS
sweep "$LOCAL" "$LOCAL.log"
rc=$?
[[ $rc -eq 0 ]] && check ok "sweep $CONFIG without Slurm: rc 0, $((SECONDS - t0)) s" \
    || check FAIL "sweep $CONFIG without Slurm: rc $rc, $((SECONDS - t0)) s (log: $LOCAL.log)"
if .venv/bin/python ci/node/compare-tables "$ON_SLURM" "$LOCAL"; then
    check ok "$ON_SLURM and $LOCAL: counts.csv and perf.csv equal"
else
    check FAIL "$ON_SLURM and $LOCAL: tables differ (lines above)"
fi
exit $FAILED
