#!/usr/bin/env bash
# The README's install of the PyTorch bridge, offline, into a fresh virtual environment that sees
# Debian's packages; then the installed package resolves a model preset outside the repository.
# Usage: venv_install.sh PYTHON3 REPO_ROOT SCRATCH_DIR
set -euo pipefail
py=$1 repo=$2 scratch=$3
rm -rf "$scratch" && mkdir -p "$scratch"
"$py" -m venv --system-site-packages "$scratch/venv"
# A copy of python/ and configs/models, so the in-tree build leaves the checkout clean.
mkdir -p "$scratch/src/configs" && cp -r "$repo/python" "$scratch/src/python" && cp -r "$repo/configs/models" "$scratch/src/configs/models"
"$scratch/venv/bin/pip" install --quiet --no-index --no-build-isolation "$scratch/src/python"
cd "$scratch"
"$scratch/venv/bin/python" -m sparsp_torch record --help > /dev/null
"$scratch/venv/bin/python" -c "
import sparsp_torch as st
L = st.Layout.from_model('hunyuanvideo-720p')
assert L.num_blocks == 931, L.num_blocks
print('installed sparsp_torch', st.__version__, 'resolves presets:', L.num_blocks, 'blocks')"
