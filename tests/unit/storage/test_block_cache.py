"""The block cache's folder is shared: opening it never touches another live writer's files."""
import os
import socket
import subprocess
import sys

from mmgrasp.storage.remote.block_cache import BlockCache

from _remote_helpers import dead_pid


def test_scan_keeps_live_writers_temp_files_and_removes_abandoned_ones(tmp_path):
    folder = tmp_path / 'blocks'
    folder.mkdir()
    host = socket.gethostname()
    writer = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])
    try:
        live = folder / f'0123.data.tmp-{host}-{writer.pid}-7'
        other_host = folder / f'0123.source.tmp-some-other-host-{os.getpid()}-7'
        abandoned = folder / f'4567.data.tmp-{host}-{dead_pid()}-7'
        for path in (live, other_host, abandoned):
            path.write_bytes(b'x' * 64)
        BlockCache(str(folder), budget=1 << 20, block_size=64)
        assert live.exists(), 'a live process sharing the cache lost the file it is writing'
        assert other_host.exists(), 'a process of another host cannot be checked: left alone'
        assert not abandoned.exists(), 'a dead writer\'s leftover stays forever'
    finally:
        writer.kill()
        writer.wait()
