# The GSNet demo with a validation loop: after every epoch the model runs on frame 0 of each
# synthetic test scene (3 frames) and GraspNetMetric scores them, so the log and
# vis_data/scalars.json carry graspnet/AP per epoch, labelled "sampled" (3 of the split's
# frames: a training curve, not comparable with published AP). Plot it with
#   python tools/analysis/analyze_logs.py plot_curve WORK_DIR/*/vis_data/scalars.json \
#       --keys graspnet/AP --out ap.png
# The same four keys turn validation on for any config whose test_dataloader and
# test_evaluator are GraspNet's (copy them, choose the frames, give the dump its own folder).
_base_ = ['./gsnet_demo.py']

val_dataloader = dict(
    batch_size=1, num_workers=0, persistent_workers=False,
    sampler=dict(type='EpochAwareSampler', shuffle=False),
    collate_fn=dict(type='pseudo_collate'),
    dataset=dict(
        type='GraspNetDataset', data_root={{_base_.data_root}}, split='test',
        camera='realsense', seed=0, frames=[0],
        pipeline={{_base_.test_dataloader.dataset.pipeline}}))
val_evaluator = dict(type='GraspNetMetric', data_root={{_base_.data_root}}, camera='realsense',
                     split='test', dump_dir='work_dirs/gsnet_demo_val/val_dump', nproc=1,
                     progress=False)
val_cfg = dict(type='ValLoop')
train_cfg = dict(val_interval=1)
