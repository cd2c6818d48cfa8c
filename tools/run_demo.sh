#!/usr/bin/env bash
# The README's main job: write the synthetic dataset (once; real GraspNet-1Billion layout and
# 300x12x4 label grid, training scenes 0-3 and test scenes 100, 130, 160), GSNet's graspness
# labels (once), train configs/gsnet_demo.py, then evaluate the last checkpoint on the test
# scenes with tools/test.py (GraspNet-1Billion AP table). The work dir also keeps epoch_0.pth,
# the untrained weights (InitialCheckpointHook), to evaluate the same way as a baseline.
# The label store is built on first use under $MMGRASP_CACHE (default ~/.cache/mmgrasp).
#   MMGRASP_DEMO_DATA      dataset folder        (default data/synthetic)
#   MMGRASP_DEMO_WORK_DIR  logs and checkpoints  (default work_dirs/gsnet_demo)
# Extra arguments go to tools/train.py (e.g. --cfg-options train_cfg.max_epochs=2).
set -euo pipefail
cd "$(dirname "$0")/.."
data=${MMGRASP_DEMO_DATA:-data/synthetic}
work_dir=${MMGRASP_DEMO_WORK_DIR:-work_dirs/gsnet_demo}
if [ ! -d "$data" ]; then  # the writer renames a finished dataset into place: present = complete
    python tools/data/make_synthetic.py "$data" --scenes 4 --frames 4 --objects 10 \
        --points-per-object 300 --cameras realsense
fi
python tools/data/generate_graspness.py "$data"
python tools/train.py configs/gsnet_demo.py --work-dir "$work_dir" \
    --cfg-options train_dataloader.dataset.data_root="$data" "$@"
python tools/test.py configs/gsnet_demo.py "$(cat "$work_dir/last_checkpoint")" \
    --work-dir "$work_dir/test" --dump "$work_dir/dump" --overwrite \
    --cfg-options test_dataloader.dataset.data_root="$data" test_evaluator.data_root="$data"
