#!/usr/bin/env bash
# A real single-node Slurm on this host, for `./harness sweep --slurm` and its tests: munged,
# slurmctld and slurmd from Debian's slurm-wlm and munge packages, started directly (there is
# no systemd here), with every file in a cache directory outside the repository.
#
#   setup/slurm.sh start     write the config for this host (one node: its cores and memory;
#                            one partition `harness`), create the state directories, start
#                            munged, slurmctld and slurmd, wait until `sinfo` shows the node
#                            up; a second call starts only what is not running
#   setup/slurm.sh stop      stop the three daemons this script started (by their pid files)
#   setup/slurm.sh status    sinfo and squeue of the local Slurm; exit 1 if it is not up
#   setup/slurm.sh --conf    print the path of its slurm.conf (export SLURM_CONF=<it>; the
#                            Slurm commands find it without, through /run/slurm/conf/slurm.conf)
#
# Environment: HARNESS_CACHE=DIR cache root (default ${XDG_CACHE_HOME:-~/.cache}/sve-harness).
# Installed by `setup/install.sh --with-slurm` (the no-removal apt rule), stopped by
# `setup/install.sh --stop-slurm`.
#
# The daemons run as root (slurmd starts each job as its user). An ordinary user with sudo (the
# arm64 node's `harness`, a workstation's admin) gets start and stop through `sudo -n`, the
# files still in the user's cache; without sudo, one line says who can.
#
# Accounting: slurmdbd needs a MySQL/MariaDB server, which this single node does without:
# accounting_storage/none, and every finished job is written by jobcomp/filetxt to
# jobcomp.log (job id, name, state, node, times). Slurm 22.05's `sacct` cannot read that file
# (`sacct -c` is gone), so `sacct` lists nothing here; `squeue --states=all` and
# `scontrol show job` keep each job with its name, comment and reason for MinJobAge (1 hour).
set -euo pipefail

ME="setup/slurm.sh"
die() { echo "$ME: $*" >&2; exit 1; }
say() { echo "$ME: $*" >&2; }

CACHE="${HARNESS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/sve-harness}"
DIR="$CACHE/slurm"
CONF="$DIR/slurm.conf"
PARTITION=harness
RUN_LINK=/run/slurm/conf/slurm.conf
export SLURM_CONF="$CONF"

alive() {  # $1 = DAEMON.pid: the process it names runs and is DAEMON
    # By its name too: the daemons die with the session that started them and leave their pid
    # files; the pid wraps at 32768 within minutes of a test suite, and `stop` killed whatever
    # process had taken the number.
    [[ -s "$1" ]] && [[ "$(cat "/proc/$(cat "$1")/comm" 2>/dev/null)" == "$(basename "$1" .pid)" ]]
}

node_up() {  # the node answers and can take jobs
    local state
    # Bounded: without munged, one sinfo call waited more than 90 s (measured), and start's
    # 60 calls of a 30 s wait could take over an hour.
    state="$(timeout 5 sinfo -h -p "$PARTITION" -o '%t' 2>/dev/null | head -n1)" || return 1
    [[ "$state" =~ ^(idle|mix|alloc|comp)$ ]]
}

write_conf() {
    # slurmd -C prints this host as Slurm sees it (CPUs, sockets, cores, threads, memory).
    local node
    node="$(slurmd -C | head -n1)"
    [[ "$node" == NodeName=* ]] || die "slurmd -C did not describe this host: $node"
    NODE="${node%% *}"; NODE="${NODE#NodeName=}"
    local name="$NODE"
    mkdir -p "$DIR/state/ctld" "$DIR/state/d" "$DIR/run" "$DIR/log" "$DIR/munge"
    # The jobs' users reach munged's socket in it (the key stays 600); munged --force accepts a
    # folder under a user's home.
    chmod 755 "$DIR/munge"
    # slurmd 22.05 loads a cgroup plugin at start although nothing here uses cgroups, and its
    # autodetection fails where no cgroup filesystem is mounted (no systemd: the arm64 node;
    # slurmd.log "No filesystem mounted on /sys/fs/cgroup"): name one there.
    if mountpoint -q /sys/fs/cgroup; then rm -f "$DIR/cgroup.conf"; else echo "CgroupPlugin=cgroup/v1" >"$DIR/cgroup.conf"; fi
    cat >"$CONF.new" <<EOF
# Written by $ME for this host; rewritten at every start.
ClusterName=sveharness
SlurmctldHost=$name(127.0.0.1)
SlurmUser=root
SlurmdUser=root
SlurmctldPort=6817
SlurmdPort=6818
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$DIR/munge/munge.socket
StateSaveLocation=$DIR/state/ctld
SlurmdSpoolDir=$DIR/state/d
SlurmctldPidFile=$DIR/run/slurmctld.pid
SlurmdPidFile=$DIR/run/slurmd.pid
SlurmctldLogFile=$DIR/log/slurmctld.log
SlurmdLogFile=$DIR/log/slurmd.log
# No cgroups in a container: track processes by parent id, no task binding.
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
SchedulerType=sched/backfill
# A submitted batch job waits for slurmctld's next scheduling pass, which its once-a-second loop
# starts only 3 s (batch_sched_delay) after the last one: a sweep's Slurm jobs that follow
# another's end waited 3 s each. 0: the next second's pass (Slurm 22.05 schedules no batch job
# at submission).
SchedulerParameters=batch_sched_delay=0
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
# A node set down by hand stays down until scontrol update state=resume (2 would bring it back
# as soon as slurmd registers again, as it does within seconds).
ReturnToService=1
# The daemons die with the session that started them. With Slurm's default (1) a job that ran
# then was started again after the next start (measured), with its Snakemake gone, to write into
# a results folder no command holds; start cancels such a job instead (cancel_ghosts).
JobRequeue=0
# A time limit is enforced within a minute.
OverTimeLimit=0
KillWait=5
# Finished jobs stay visible to squeue and scontrol for an hour (the executor's status queries).
MinJobAge=3600
# No slurmdbd (it needs MariaDB): finished jobs go to a text file.
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/filetxt
JobCompLoc=$DIR/log/jobcomp.log
$node NodeAddr=127.0.0.1 State=UNKNOWN
PartitionName=$PARTITION Nodes=$name Default=YES MaxTime=INFINITE State=UP
EOF
}

install_conf() {  # the rendered config in place, and where the jobs' commands look for it
    mv "$CONF.new" "$CONF"
    # Where a configless slurmd puts the file and every Slurm command looks after SLURM_CONF: the
    # commands inside a job find it there (the executor's job step runs srun without SLURM_CONF).
    # A file of someone else's is left alone.
    if [[ ! -e $RUN_LINK || "$(readlink "$RUN_LINK")" == "$CONF" ]]; then
        mkdir -p "$(dirname "$RUN_LINK")" && ln -sfn "$CONF" "$RUN_LINK"
    else
        die "$RUN_LINK exists and is not ours; the jobs' srun would read it (remove it or stop that Slurm)"
    fi
}

start() {
    for c in munged mungekey slurmctld slurmd sinfo; do
        command -v "$c" >/dev/null 2>&1 || die "$c not found; fix: ./harness setup --with-slurm"
    done
    write_conf
    if alive "$DIR/run/munged.pid" && alive "$DIR/run/slurmctld.pid" && alive "$DIR/run/slurmd.pid" && node_up; then
        # A Slurm started by an earlier version of this script gets this one's config.
        if ! cmp -s "$CONF.new" "$CONF"; then
            install_conf
            scontrol reconfigure || die "scontrol reconfigure did not take the new $CONF (log: $DIR/log/slurmctld.log)"
            say "the running Slurm took the changed config (scontrol reconfigure)"
        fi
        rm -f "$CONF.new"
        say "Slurm is up: $(sinfo -h -p "$PARTITION" -o '%P %D node(s) %t %c CPUs %m MB')"
        return 0
    fi
    install_conf
    if ! alive "$DIR/run/munged.pid"; then
        [[ -s "$DIR/munge/munge.key" ]] || mungekey --create --keyfile="$DIR/munge/munge.key" >/dev/null
        chmod 600 "$DIR/munge/munge.key"
        munged --force --socket="$DIR/munge/munge.socket" --key-file="$DIR/munge/munge.key" \
            --pid-file="$DIR/run/munged.pid" --log-file="$DIR/log/munged.log" \
            --seed-file="$DIR/munge/munged.seed" \
            || die "munged did not start (log: $DIR/log/munged.log)"
    fi
    alive "$DIR/run/slurmctld.pid" || slurmctld -f "$CONF" || die "slurmctld did not start (log: $DIR/log/slurmctld.log)"
    local ghosts=""
    if ! alive "$DIR/run/slurmd.pid"; then
        # No job step runs on this host: a job slurmctld still has as running died with them.
        pgrep -x slurmstepd >/dev/null || ghosts=yes
        slurmd -f "$CONF" || die "slurmd did not start (log: $DIR/log/slurmd.log)"
    fi
    local i=0 end=$((SECONDS + 30))
    while ((SECONDS < end)); do
        if node_up; then
            [[ -z "$ghosts" ]] || cancel_ghosts
            say "Slurm is up: $(sinfo -h -p "$PARTITION" -o '%P %D node(s) %t %c CPUs %m MB'); export SLURM_CONF=$CONF"
            return 0
        fi
        # A node left down (scontrol update state=down) stays down across restarts: start resumes it.
        if [[ $((++i)) -eq 5 ]] && timeout 5 sinfo -h -n "$NODE" -o '%t' | grep -Eq '^(down|drain|drng)'; then
            timeout 10 scontrol update nodename="$NODE" state=resume || true
        fi
        sleep 0.5
    done
    die "the node did not come up in 30 s: $(timeout 5 sinfo -h -o '%N %t %E' 2>&1 | head -n1) (logs: $DIR/log/)"
}

cancel_ghosts() {
    # The daemons died with the session that started them, and the jobs with them; slurmctld
    # recovers those it saved as running and keeps their cores until their time limits (a
    # recovered job ran for minutes on a node with no process of it). Their Snakemakes are gone.
    local ids
    ids="$(timeout 10 squeue -h -p "$PARTITION" -t RUNNING,COMPLETING -o %i | paste -sd' ')" || return 0
    [[ -n "$ids" ]] || return 0
    # shellcheck disable=SC2086
    timeout 10 scancel $ids || true
    say "cancelled job(s) $ids: slurmctld had them running, but they had died with the daemons"
}

stop() {
    local d pid stopped=()
    for d in slurmd slurmctld munged; do
        if alive "$DIR/run/$d.pid"; then
            pid="$(cat "$DIR/run/$d.pid")"
            kill "$pid"
            for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
            kill -0 "$pid" 2>/dev/null && die "$d (pid $pid) did not stop"
            stopped+=("$d")
        fi
    done
    if [[ "$(readlink "$RUN_LINK" 2>/dev/null)" == "$CONF" ]]; then rm -f "$RUN_LINK"; fi
    if [[ ${#stopped[@]} -eq 0 ]]; then say "Slurm was not running"; else say "stopped ${stopped[*]}"; fi
}

anything_to_stop() {  # a daemon of this cache runs, or the jobs' conf link is still ours
    local d
    for d in slurmd slurmctld munged; do alive "$DIR/run/$d.pid" && return 0; done
    [[ "$(readlink "$RUN_LINK" 2>/dev/null)" == "$CONF" ]]
}

as_root() {  # start or stop as root: this script again through sudo, with this user's cache
    [[ "$(id -u)" != 0 ]] || return 0
    local fix="run it as root, or as a user with password-less sudo"
    command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null \
        || die "the local Slurm's daemons run as root (slurmd starts each job as its user), and this user has no sudo: $fix"
    # The cache is made as this user first: made by root, the user could no longer write in it.
    mkdir -p "$CACHE"
    exec sudo -n env HARNESS_CACHE="$CACHE" bash "$(readlink -f "${BASH_SOURCE[0]}")" "$1"
}

case "${1:-}" in
    start) as_root start; start ;;
    # Nothing to stop needs no root: a user without sudo (its test suite's teardown too) is told so.
    stop) if anything_to_stop; then as_root stop; fi; stop ;;
    status)
        node_up || { echo "$ME: the local Slurm is not up (fix: ./harness setup --with-slurm)"; exit 1; }
        sinfo -p "$PARTITION"; squeue ;;
    --conf) echo "$CONF" ;;
    *) die "usage: $ME start|stop|status|--conf" ;;
esac
