#!/usr/bin/env bash
# Reading a Referable with kubectl: wait until it has a value, then print it. The tests run these
# commands against referables.yaml (test/integration/consumers.test.ts), with their names renamed.
set -euo pipefail
# Ready, and the value as text (a number prints as 5432, with no quotes).
kubectl wait --for=condition=Ready --timeout=60s referable/consumers-example-port
kubectl get referable consumers-example-port -o jsonpath='{.status.text}'
echo
# Wait for a given value: --for=jsonpath compares text, so status.text fits any value's type.
kubectl wait --for=jsonpath='{.status.text}'=5432 --timeout=60s referable/consumers-example-port
