"""tools/analysis/analyze_logs.py in mmdet's command shape: plot_curve draws the chosen scalars
of vis_data/scalars.json logs to a PNG, cal_train_time reads the per-iteration times; a key no
record holds is named with the keys the log has."""
import json
import os
import subprocess
import sys

import cv2
import numpy as np

from _scripts import script_module

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))
TOOL = os.path.join(REPO, 'tools', 'analysis', 'analyze_logs.py')


def run(*args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([REPO, os.environ.get('PYTHONPATH', '')]))
    return subprocess.run([sys.executable, TOOL, *args], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=120)


def write_log(path, losses, times):
    with open(path, 'w') as f:
        for i, (loss, t) in enumerate(zip(losses, times)):
            f.write(json.dumps(dict(lr=1e-3, loss=loss, loss_view=loss / 4, time=t,
                                    epoch=1 + i // 2, iter=i + 1, step=i + 1)) + '\n')
        f.write(json.dumps({'seen/AP': 7.5, 'step': 2}) + '\n')  # a validation record
    return str(path)


def test_plot_curve_draws_each_key(tmp_path):
    log = write_log(tmp_path / 'scalars.json', [9.0, 7.0, 5.0, 4.0], [1.0, 1.0, 0.5, 0.7])
    one, two = str(tmp_path / 'one.png'), str(tmp_path / 'two.png')
    out = run('plot_curve', log, '--keys', 'loss', '--out', one)
    assert out.returncode == 0, out.stderr
    out = run('plot_curve', log, '--keys', 'loss', 'loss_view', 'seen/AP', '--legend', 'a', 'b',
              'c', '--title', 'demo', '--out', two)
    assert out.returncode == 0, out.stderr
    a, b = cv2.imread(one), cv2.imread(two)
    assert a.shape == b.shape and a.shape[2] == 3
    # more curves, more coloured pixels (lines are drawn, not an empty canvas)
    coloured = [int((np.ptp(x.astype(int), axis=2) > 60).sum()) for x in (a, b)]
    assert 0 < coloured[0] < coloured[1], coloured


def test_plot_curve_names_a_missing_key_and_a_bad_line(tmp_path):
    log = write_log(tmp_path / 'scalars.json', [9.0, 7.0], [1.0, 1.0])
    out = run('plot_curve', log, '--keys', 'loss_cls', '--out', str(tmp_path / 'x.png'))
    assert out.returncode != 0 and "no record holds 'loss_cls'" in out.stderr
    assert 'loss_view' in out.stderr and not os.path.exists(tmp_path / 'x.png')
    bad = tmp_path / 'bad.json'
    bad.write_text('{"loss": 1, "step": 1}\nnot json\n')
    out = run('plot_curve', str(bad), '--out', str(tmp_path / 'y.png'))
    assert out.returncode != 0 and 'bad.json:2: not a JSON record' in out.stderr
    out = run('plot_curve', log, '--keys', 'loss', '--legend', 'a', 'b', '--out',
              str(tmp_path / 'z.png'))
    assert out.returncode != 0 and '--legend needs 1 names' in out.stderr


def test_plot_curve_without_out_is_refused(tmp_path):
    """Drawn offscreen, there is no window to show: without --out the tool used to exit 0
    having shown and written nothing."""
    log = write_log(tmp_path / 'scalars.json', [9.0, 7.0], [1.0, 1.0])
    out = run('plot_curve', log, '--keys', 'loss')
    assert out.returncode != 0 and 'the following arguments are required: --out' in out.stderr
    assert os.listdir(tmp_path) == ['scalars.json']


def test_several_logs_are_named_by_their_config(tmp_path):
    """A work dir holds the config mmengine dumps (<config>.py) and one <timestamp>/vis_data/
    scalars.json per run: curves are named by the config, and by the timestamp too only where
    two runs share one."""
    logs = []
    for work, config, stamp in (('a', 'gsnet_demo', '20261203_101010'),
                                ('b', 'economicgrasp_demo', '20261203_111111'),
                                ('b', 'economicgrasp_demo', '20261204_090000')):
        os.makedirs(tmp_path / work / stamp / 'vis_data')
        (tmp_path / work / f'{config}.py').write_text('')
        logs.append(write_log(tmp_path / work / stamp / 'vis_data' / 'scalars.json', [9.0, 7.0],
                              [1.0, 1.0]))
    tool = script_module('tools/analysis/analyze_logs.py')
    assert tool.legend_names(logs[:1], ['loss']) == ['loss']
    assert tool.legend_names(logs[:2], ['loss', 'loss_view']) == [
        'gsnet_demo loss', 'gsnet_demo loss_view', 'economicgrasp_demo loss',
        'economicgrasp_demo loss_view']
    assert tool.legend_names(logs, ['loss']) == [
        'gsnet_demo loss', 'economicgrasp_demo 20261203_111111 loss',
        'economicgrasp_demo 20261204_090000 loss']
    out = run('plot_curve', *logs, '--out', str(tmp_path / 'three.png'))
    assert out.returncode == 0 and cv2.imread(str(tmp_path / 'three.png')) is not None


def test_cal_train_time_reads_the_epoch_means(tmp_path):
    log = write_log(tmp_path / 'scalars.json', [9.0, 7.0, 5.0, 4.0], [1.0, 1.0, 0.5, 0.7])
    out = run('cal_train_time', log)
    assert out.returncode == 0, out.stderr
    assert 'slowest epoch 1, mean time 1.0000 s/iter' in out.stdout
    assert 'fastest epoch 2, mean time 0.6000 s/iter' in out.stdout
    assert 'mean time over the logged iterations: 0.8000 s/iter' in out.stdout
