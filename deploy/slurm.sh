#!/bin/bash
# One owner + one worker per node under Slurm, through a broker that lets in
# only this job's processes (TLS with its own CA, one NKey per role). Submit:
#   sbatch --nodes=8 --ntasks-per-node=1 --gpus-per-node=8 deploy/slurm.sh /data/pdfs
# PIPELINE is your pipeline binary (the same on every node, built with the
# kit's `dist` feature); CALLS the slots each worker serves (here: 8 OCR
# slots per 8-GPU node). STATE must be a folder every node sees (the
# broker's CA and the job's NKey seeds are written there, readable by you
# only); the broker's queues stay on the head node's local disk.
#SBATCH --job-name=rayorch
#SBATCH --ntasks-per-node=1
set -euo pipefail
PIPELINE=${PIPELINE:-./target/release/my_pipeline}
CALLS=${CALLS:-ocr:8,detect:2}
HEAD=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n1)
JOB="slurm-$SLURM_JOB_ID"
STATE=${STATE:-$SLURM_SUBMIT_DIR/.rayorch-$JOB}
SECRETS="$STATE/broker/nats/secrets"
URL="tls://$HEAD:4222"
export PIPELINE CALLS HEAD JOB STATE SECRETS URL

srun --ntasks-per-node=1 bash -c '
  ca="$SECRETS/ca.pem"
  if [ "$SLURM_PROCID" = 0 ]; then
    # The pinned nats-server with JetStream, TLS and the job'"'"'s account,
    # named $HEAD in its certificate; it dies with this task.
    "$PIPELINE" --serve-nats 4222 --nats-listen 0.0.0.0 --nats-host "$HEAD" \
      --job "$JOB" --out "$STATE/broker" &
  fi
  # Every task waits for the broker'"'"'s secrets on the shared folder.
  for _ in $(seq 300); do [ -s "$SECRETS/nats.conf" ] && break; sleep 1; done
  sleep 2
  if [ "$SLURM_PROCID" = 0 ]; then
    "$PIPELINE" --role owner --nats "$URL" --nats-ca "$ca" \
      --nats-nkey "$SECRETS/jobs/$JOB/owner.nk" --job "$JOB" "$@" &
  fi
  exec "$PIPELINE" --role worker --nats "$URL" --nats-ca "$ca" \
    --nats-nkey "$SECRETS/jobs/$JOB/worker.nk" --job "$JOB" --calls "$CALLS"
' -- "$@"
