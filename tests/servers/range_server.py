"""A small HTTP/1.1 server of one local folder with byte ranges, ETags and injectable faults.

For tests and benchmarks of remote label stores, never for serving data in earnest: it binds to
127.0.0.1 on a free port, in a thread of the calling process, and can

- delay every answer (a round trip) and cap the bandwidth shared by all connections;
- inject faults on matching requests: ``reset`` (the connection is closed with an RST and no
  answer), ``status`` (an HTTP error such as 503), ``stall`` (no answer for a while: a client
  timeout), ``short`` (the announced length, then only half the body, then the connection
  closes);
- count requests and the most that were in flight at once;
- be killed mid-read (:meth:`RangeServer.kill`).

A file replaced in the folder gets a new ETag (size, mtime, inode), and ``If-Match`` with an old
one is answered 412, as real servers and object stores do.
"""
import os
import re
import socket
import struct
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import List, Optional, Tuple
from urllib.parse import unquote, urlsplit

_CHUNK = 64 * 1024


@dataclass
class Fault:
    """``kind`` on the next ``count`` requests whose path contains ``match``."""
    kind: str  # 'reset', 'status', 'stall', 'short'
    match: str = ''
    count: int = 1
    status: int = 503
    seconds: float = 2.0


@dataclass
class Logged:
    path: str
    range: Optional[Tuple[int, int]]  # [start, stop) asked for
    status: int
    sent: int
    method: str = 'GET'


@dataclass
class ServerState:
    latency: float = 0.0
    linger: float = 0.0  # seconds a handler stays busy after its answer is out (a slow thread)
    bandwidth: Optional[float] = None  # bytes per second, all connections together
    faults: List[Fault] = field(default_factory=list)
    log: List[Logged] = field(default_factory=list)
    in_flight: int = 0
    max_in_flight: int = 0
    next_free: float = 0.0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def take_fault(self, path: str) -> Optional[Fault]:
        with self.lock:
            for fault in self.faults:
                if fault.match in path and fault.count > 0:
                    fault.count -= 1
                    return fault
        return None

    def throttle(self, nbytes: int) -> None:
        if not self.bandwidth:
            return
        with self.lock:
            now = time.perf_counter()
            self.next_free = max(now, self.next_free) + nbytes / self.bandwidth
            wait = self.next_free - now
        time.sleep(wait)


def etag_of(st: os.stat_result) -> str:
    return f'"{st.st_size:x}-{st.st_mtime_ns:x}-{st.st_ino:x}"'


class _Handler(BaseHTTPRequestHandler):
    protocol_version = 'HTTP/1.1'
    server: '_Server'

    def log_message(self, *args) -> None:  # quiet
        pass

    def setup(self) -> None:
        super().setup()
        with self.server.state.lock:
            self.server.connections.add(self.connection)

    def finish(self) -> None:
        with self.server.state.lock:
            self.server.connections.discard(self.connection)
        try:
            super().finish()
        except OSError:  # the connection was reset (a fault, or the server killed)
            pass

    def _record(self, path, byte_range, status, sent, method: str = 'GET') -> None:
        """Log a request; a stalled one was logged on arrival (status 0) and is updated."""
        with self.server.state.lock:
            entry = getattr(self, '_arrived', None)
            if entry is None:
                self.server.state.log.append(Logged(path, byte_range, status, sent, method))
            else:
                entry.status, entry.sent, self._arrived = status, sent, None

    def _reset(self) -> None:
        self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack('ii', 1, 0))
        self.connection.close()
        self.close_connection = True

    def do_GET(self) -> None:
        state = self.server.state
        with state.lock:
            state.in_flight += 1
            state.max_in_flight = max(state.max_in_flight, state.in_flight)
        self._counted = True
        try:
            self._get(state)
        finally:
            self._answered()
        if state.linger:
            time.sleep(state.linger)

    def _answered(self) -> None:
        """The request leaves the in-flight count before its last bytes are written: a client
        holding its whole answer may send the next request at once, and that one must not find
        this one still counted (a thread switch before ``finally`` would count both)."""
        if getattr(self, '_counted', False):
            self._counted = False
            with self.server.state.lock:
                self.server.state.in_flight -= 1

    def do_HEAD(self) -> None:
        """Size and ETag, no body (logged as a HEAD: the reader is meant never to send one)."""
        path = unquote(urlsplit(self.path).path)
        local = os.path.realpath(os.path.join(self.server.folder, path.lstrip('/')))
        inside = os.path.commonpath([local, self.server.folder]) == self.server.folder
        status = 200 if inside and os.path.isfile(local) else 404
        self._record(path, None, status, 0, 'HEAD')
        self.send_response(status)
        if status == 200:
            st = os.stat(local)
            self.send_header('Content-Length', str(st.st_size))
            self.send_header('ETag', etag_of(st))
        else:
            self.send_header('Content-Length', '0')
        self.end_headers()

    def _get(self, state: ServerState) -> None:
        path = unquote(urlsplit(self.path).path)
        if state.latency:
            time.sleep(state.latency)
        local = os.path.realpath(os.path.join(self.server.folder, path.lstrip('/')))
        if os.path.commonpath([local, self.server.folder]) != self.server.folder:
            return self._answer(path, None, 404, b'not found')  # outside the served folder
        try:
            with open(local, 'rb') as f:
                st = os.fstat(f.fileno())
                size = st.st_size
                header = self.headers.get('Range')
                byte_range = None
                if header:
                    match = re.fullmatch(r'bytes=(\d+)-(\d*)', header.strip())
                    if match is None:
                        return self._answer(path, None, 416, b'bad range')
                    start = int(match.group(1))
                    stop = min(int(match.group(2)) + 1 if match.group(2) else size, size)
                    if start >= size:
                        return self._answer(path, (start, stop), 416, b'range not satisfiable')
                    byte_range = (start, stop)
                    f.seek(start)
                    body = f.read(stop - start)
                else:
                    body = f.read()
        except (FileNotFoundError, IsADirectoryError):
            return self._answer(path, None, 404, b'not found')
        fault = state.take_fault(path)
        if fault is not None and fault.kind == 'reset':
            self._record(path, byte_range, 0, 0)
            return self._reset()
        if fault is not None and fault.kind == 'stall':
            # logged when it arrives: a request the client gave up on still reached the server
            self._arrived = Logged(path, byte_range, 0, 0)
            with state.lock:
                state.log.append(self._arrived)
            time.sleep(fault.seconds)
        if fault is not None and fault.kind == 'status':
            return self._answer(path, byte_range, fault.status, b'injected fault')
        tag = etag_of(st)
        expected = self.headers.get('If-Match')
        if expected and expected != tag:
            return self._answer(path, byte_range, 412, b'precondition failed')
        status = 206 if byte_range else 200
        short = fault is not None and fault.kind == 'short'
        # logged before answering: a client that has its answer finds it in the log
        self._record(path, byte_range, status, len(body) // 2 if short else len(body))
        self.send_response(status)
        self.send_header('Content-Length', str(len(body)))
        self.send_header('ETag', tag)
        self.send_header('Accept-Ranges', 'bytes')
        if byte_range:
            self.send_header('Content-Range', f'bytes {byte_range[0]}-{byte_range[1] - 1}/{size}')
        self.end_headers()
        if short:
            self.wfile.write(body[:len(body) // 2])
            self.wfile.flush()
            self.connection.shutdown(socket.SHUT_WR)  # end of stream: fewer bytes than announced
            self.close_connection = True
            return
        for begin in range(0, len(body), _CHUNK):
            chunk = body[begin:begin + _CHUNK]
            state.throttle(len(chunk))
            if begin + _CHUNK >= len(body):
                self._answered()
            self.wfile.write(chunk)
        self._answered()  # an empty body

    def _answer(self, path, byte_range, status: int, text: bytes) -> None:
        self._record(path, byte_range, status, len(text))
        self.send_response(status)
        self.send_header('Content-Length', str(len(text)))
        self.end_headers()
        self._answered()
        self.wfile.write(text)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128

    def __init__(self, folder: str, state: ServerState):
        super().__init__(('127.0.0.1', 0), _Handler)
        self.folder, self.state = os.path.realpath(folder), state
        self.connections = set()

    def handle_error(self, request, client_address) -> None:
        pass  # a client that gave up (timeout) closed the socket the answer went to


class RangeServer:
    """``with RangeServer(folder) as server: server.url`` — serves ``folder`` until the block
    ends."""

    def __init__(self, folder: str, latency: float = 0.0, bandwidth: Optional[float] = None):
        self.state = ServerState(latency=latency, bandwidth=bandwidth)
        self._server = _Server(folder, self.state)
        self._thread = threading.Thread(target=self._server.serve_forever,
                                        name='mmgrasp-range-server', daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f'http://{host}:{port}'

    def inject(self, kind: str, match: str = '', count: int = 1, **kwargs) -> Fault:
        fault = Fault(kind, match, count, **kwargs)
        with self.state.lock:
            self.state.faults.append(fault)
        return fault

    def kill(self) -> None:
        """Die as a killed server process does: nothing listens any more, and every open
        connection (an answer in progress included) ends with an RST."""
        self._server.shutdown()
        self._server.server_close()
        with self.state.lock:
            connections = list(self._server.connections)
        for connection in connections:
            try:
                connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                                      struct.pack('ii', 1, 0))
                connection.shutdown(socket.SHUT_RDWR)  # now, whoever holds the socket's files
                connection.close()
            except OSError:
                pass

    def requests(self, match: str = '') -> List[Logged]:
        with self.state.lock:
            return [entry for entry in self.state.log if match in entry.path]

    def clear_log(self) -> None:
        with self.state.lock:
            self.state.log.clear()
            self.state.max_in_flight = 0

    def __enter__(self) -> 'RangeServer':
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()
