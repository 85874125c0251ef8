#!/usr/bin/env bash
# Runs deploy/slurm-plan.sh as the Slurm array job its header describes, on a one-node Slurm
# started here (slurmctld and slurmd of Debian's slurm-wlm, as root, auth/none, private ports
# and folders), then the merge job its comment gives, and prints the merged plan.
#
#   tests/slurm/array-job.sh WORKDIR SCENARIO
#
# WORKDIR: an empty folder for Slurm's state and logs and the results; SCENARIO: relative to
# the repository root. `servesim` must be on PATH. Exit 77 when Slurm is not installed, 78 when
# not run as root.
set -euo pipefail
work=$(realpath "$1"); scenario=$2
root=$(cd "$(dirname "$0")/../.." && pwd)
[ "$(id -u)" = 0 ] || { echo "skipped: a one-node Slurm runs its daemons as root, and this user is not"; exit 78; }
for d in slurmctld slurmd sbatch scontrol; do
    command -v "$d" >/dev/null || { echo "skipped: $d not installed (apt-get install slurmd slurmctld slurm-client)"; exit 77; }
done
mkdir -p "$work/state" "$work/spool" "$work/results"
host=$(hostname -s)
cpus=$(nproc)
ports=$(( 20000 + $$ % 20000 ))
cat > "$work/slurm.conf" <<CONF
ClusterName=servesim-test
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$ports
SlurmdPort=$(( ports + 1 ))
SlurmUser=root
SlurmdUser=root
AuthType=auth/none
CredType=cred/none
MpiDefault=none
ProctrackType=proctrack/pgid
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/builtin
ReturnToService=2
StateSaveLocation=$work/state
SlurmdSpoolDir=$work/spool
SlurmctldPidFile=$work/slurmctld.pid
SlurmdPidFile=$work/slurmd.pid
SlurmctldLogFile=$work/slurmctld.log
SlurmdLogFile=$work/slurmd.log
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/none
MinJobAge=600
NodeName=$host NodeAddr=127.0.0.1 CPUs=$cpus State=UNKNOWN
PartitionName=debug Nodes=$host Default=YES MaxTime=INFINITE State=UP
CONF
export SLURM_CONF=$work/slurm.conf
stop() {
    [ -f "$work/slurmd.pid" ] && kill "$(cat "$work/slurmd.pid")" 2>/dev/null || true
    [ -f "$work/slurmctld.pid" ] && kill "$(cat "$work/slurmctld.pid")" 2>/dev/null || true
}
trap stop EXIT
slurmctld -f "$SLURM_CONF" -i
slurmd -f "$SLURM_CONF"
# The node comes up idle within a few seconds.
for _ in $(seq 60); do
    state=$(scontrol show node "$host" 2>/dev/null | sed -n 's/.*State=\([A-Z+]*\).*/\1/p' | head -1)
    [ "$state" = IDLE ] && break
    sleep 0.5
done
[ "$state" = IDLE ] || { echo "slurm node not idle: ${state:-no answer}"; tail -20 "$work"/slurm*.log; exit 1; }
# The recipe as its header says: sbatch the script, then the merge after it.
cd "$root"
export SCENARIO=$root/$scenario RESULTS=$work/results/plan
jobid=$(sbatch --parsable --chdir="$work" deploy/slurm-plan.sh)
merge=$(sbatch --parsable --chdir="$work" --dependency=afterok:"$jobid" --wrap "servesim merge $RESULTS > $work/results/plan.txt")
for _ in $(seq 600); do
    job=$(scontrol show job "$merge" 2>/dev/null)
    left=$(sed -n 's/.*JobState=\([A-Z_]*\).*/\1/p' <<<"$job" | head -1)
    case "$left" in COMPLETED|FAILED|CANCELLED|TIMEOUT|NODE_FAIL|OUT_OF_MEMORY) break ;; esac
    grep -q DependencyNeverSatisfied <<<"$job" && break
    sleep 0.5
done
tasks=$(ls "$work"/servesim-plan-"$jobid"_*.log 2>/dev/null | wc -l)
if [ "$left" != COMPLETED ]; then
    echo "merge job $merge: ${left:-unknown}; array job $jobid ran $tasks tasks"
    scontrol show job "$jobid" | grep -E "JobState|ExitCode" || true
    cat "$work"/servesim-plan-*.log 2>/dev/null | tail -20
    exit 1
fi
echo "array job $jobid: $tasks tasks"
cat "$work/results/plan.txt"
