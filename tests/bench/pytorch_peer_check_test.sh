#!/usr/bin/env bash
# bench/pytorch_peer.py --check-shapes: the PyTorch models the benchmark times
# are our zoo's Inception V3 and SqueezeNet, operator for operator, and
# folding BatchNorm keeps Inception's output. Exit 77 (skipped) without
# PyTorch or the IOS reference exports. Usage: pytorch_peer_check_test.sh SRC
set -euo pipefail
src="$1"
reference="$src/../shared/fixtures/ios-reference/models"
if ! /usr/bin/python3 -c 'import torch, torchvision' 2>/dev/null; then
  echo "SKIPPED: python3-torch / python3-torchvision not installed (bench/cpu_e2e.sh installs them)"
  exit 77
fi
if [[ ! -f "$reference/inception_v3.json" ]]; then
  echo "SKIPPED: no IOS reference exports in $reference"
  exit 77
fi
/usr/bin/python3 "$src/bench/pytorch_peer.py" --check-shapes --reference "$reference"
