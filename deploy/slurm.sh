#!/bin/bash
# One owner + one worker per node under Slurm. Submit with:
#   sbatch --nodes=8 --ntasks-per-node=1 --gpus-per-node=8 deploy/slurm.sh
# PIPELINE is your pipeline binary (the same on every node); CALLS the slots
# each worker serves (here: 8 OCR slots per 8-GPU node).
#SBATCH --job-name=rayorch
#SBATCH --ntasks-per-node=1
set -euo pipefail
PIPELINE=${PIPELINE:-./target/release/my_pipeline}
CALLS=${CALLS:-ocr:8,detect:2}
HEAD=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n1)
URL="nats://$HEAD:4222"
JOB="slurm-$SLURM_JOB_ID"

srun --ntasks-per-node=1 bash -c '
  if [ "$SLURM_PROCID" = 0 ]; then
    # JetStream file storage on local disk: survives a broker restart.
    nats-server -js -a 0.0.0.0 -p 4222 -sd "${TMPDIR:-/tmp}/nats-$SLURM_JOB_ID" &
    sleep 1
    "'"$PIPELINE"'" --role owner --nats "'"$URL"'" --job "'"$JOB"'" "$@" &
  fi
  exec "'"$PIPELINE"'" --role worker --nats "'"$URL"'" --job "'"$JOB"'" --calls "'"$CALLS"'"
' -- "$@"
