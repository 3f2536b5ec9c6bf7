#!/usr/bin/env bash
# The README's first command: builds `ag` (only it, with only the Debian packages it and
# the example need: scripts/build.sh --example), starts a local cluster (a head on
# 127.0.0.1 and two workers on 127.0.0.2 and 127.0.0.3), runs the example DDP job
# (2 ranks, gloo on CPU) through `ag submit`, shows both ranks' output, and stops
# the cluster again. Then runs the same job through the Python SDK
# (examples/submit_job.py), which ships examples/ to the workers as the working dir.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)
scripts/build.sh --example
ag="$repo/build/bin/ag"
# A session of its own, so that the example never touches another cluster here.
export AG_SESSION_DIR="${AG_SESSION_DIR:-/tmp/aethergrid-example-$(id -u)}"
rm -rf "$AG_SESSION_DIR"
trap '"$ag" stop >/dev/null || true' EXIT

"$ag" start-head --node-ip-address 127.0.0.1
"$ag" start-worker --head-node 127.0.0.1:6379 --node-ip-address 127.0.0.2 --num-cpus 2
"$ag" start-worker --head-node 127.0.0.1:6379 --node-ip-address 127.0.0.3 --num-cpus 2
echo
"$ag" list-nodes
echo
echo "\$ ag submit --num-workers 2 --placement spread -- /usr/bin/python3 examples/train.py"
"$ag" submit --num-workers 2 --placement spread --name ddp-example -- /usr/bin/python3 "$repo/examples/train.py"
job=$("$ag" list-jobs -o json | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["jobs"][0]["job_id"])')
echo
echo "\$ ag logs $job --task-index 1"
"$ag" logs "$job" --task-index 1
echo
"$ag" status "$job"
echo
echo "\$ python3 examples/submit_job.py      # the same job through the Python SDK, shipping examples/ as working_dir"
/usr/bin/python3 examples/submit_job.py
