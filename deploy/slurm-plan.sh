#!/usr/bin/env bash
# A servesim plan as a Slurm job array: task I of N sizes every N-th candidate and writes
# $RESULTS/plan-shard-I-of-N.json; `servesim merge $RESULTS` then prints the full plan.
# COMMAND=tune runs a `servesim tune` search the same way (tune-shard-I-of-N.json).
#
#   jobid=$(sbatch --parsable deploy/slurm-plan.sh)
#   sbatch --dependency=afterok:$jobid --wrap "servesim merge results/plan > results/plan.txt"
#
#SBATCH --job-name=servesim-plan
#SBATCH --array=1-4
#SBATCH --cpus-per-task=2
#SBATCH --time=00:30:00
#SBATCH --output=servesim-plan-%A_%a.log
set -euo pipefail
SCENARIO=${SCENARIO:-scenarios/peak.toml}
RESULTS=${RESULTS:-results/plan}
COMMAND=${COMMAND:-plan}
servesim "$COMMAND" --scenario "$SCENARIO" --shard "${SLURM_ARRAY_TASK_ID}/${SLURM_ARRAY_TASK_COUNT}" --out "$RESULTS" --quiet
