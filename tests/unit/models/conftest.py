import pytest
import torch


@pytest.fixture(scope='module')
def torch_one_thread():
    """One intra-op thread for a module's torch ops, restored after: the small elementwise ops
    of the image path run tens of times slower when two threads share a busy 2-core machine."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
