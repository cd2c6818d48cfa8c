"""frame_timeout holds with one process too: the serial path (the default of
eval_dump.py and GraspNetMetric) stops a frame that runs past it, as the parallel path does."""
import threading
import time

import pytest

from mmgrasp.evaluation import graspnet_dump_eval
from mmgrasp.evaluation.graspnet_dump_eval import EvaluationError, evaluate_dump
from eval_data import top_down_grasp, write_dump, write_eval_dataset


@pytest.fixture
def slow_frames(tmp_path, monkeypatch):
    root, dump = str(tmp_path / 'data'), str(tmp_path / 'dump')
    centres = write_eval_dataset(root, scene=100, frames=2)
    for f in (0, 1):
        write_dump(dump, 100, f, [top_down_grasp(0.9, centres[0])])
    real = graspnet_dump_eval.evaluate_frames
    events = []

    def slow(frames, on_frame=None, **kwargs):
        on_frame(0)  # evaluate_frames announces each frame before its work
        events.append('started')
        time.sleep(30)  # a frame far past frame_timeout, whatever the machine's load
        events.append('finished')
        return real(frames, on_frame=on_frame, **kwargs)
    monkeypatch.setattr(graspnet_dump_eval, 'evaluate_frames', slow)
    return root, dump, events


def test_serial_frame_timeout(slow_frames):
    """The first frame is interrupted (it never finishes) and the second never starts: what
    the run itself did, not a wall-clock bound that a loaded machine could break."""
    root, dump, events = slow_frames
    with pytest.raises(EvaluationError, match=r'scene 100 frame 0: no result after 1 s'):
        evaluate_dump(root, dump, 'realsense', [100], nproc=1, frame_timeout=1.0,
                      progress=False)
    assert events == ['started']


def test_serial_frame_timeout_off_the_main_thread(slow_frames):
    """Off the main thread (no SIGALRM there) the frames run in one worker process."""
    root, dump, _ = slow_frames
    caught = []

    def run():
        try:
            evaluate_dump(root, dump, 'realsense', [100], nproc=1, frame_timeout=1.0,
                          progress=False)
        except Exception as err:  # noqa: BLE001 - inspected below
            caught.append(err)
    thread = threading.Thread(target=run)
    thread.start()
    thread.join(30)
    assert len(caught) == 1 and 'no result after 1 s (frame_timeout)' in str(caught[0])


def test_timer_is_disarmed_after_the_run(tmp_path):
    root, dump = str(tmp_path / 'data'), str(tmp_path / 'dump')
    centres = write_eval_dataset(root, scene=100, frames=2)
    for f in (0, 1):
        write_dump(dump, 100, f, [top_down_grasp(0.9, centres[0])])
    acc = evaluate_dump(root, dump, 'realsense', [100], frame_timeout=1.0, progress=False)
    assert acc[100].shape == (2, 50, 6)
    time.sleep(1.2)  # an armed timer would raise FrameTimeout here
    with pytest.raises(ValueError, match='frame_timeout'):
        evaluate_dump(root, dump, 'realsense', [100], frame_timeout=0, progress=False)
