"""An S3 API server on 127.0.0.1 (moto's, in a thread of the calling process) that logs every
request and injects faults — for tests and benchmarks of remote label stores, never for data in
earnest.

moto answers the S3 protocol (signatures, ``Range``, ``If-Match`` → 412, ETags that are the MD5
of the content); in front of it a small WSGI layer

- logs each request's method, path, ``Range`` and status (the issue's "HEAD and GET per cold
  batch" are counted from here);
- injects the faults of the test range server (:class:`~servers.range_server.Fault`):
  ``reset`` (RST, no answer), ``status`` (an S3 error answer such as 503), ``stall`` (no answer
  for a while), ``short`` (the announced length, then half the body, then the connection ends);
- can be killed mid-read (:meth:`S3Server.kill`): the listening socket and every open
  connection are closed with an RST, as when the server process dies.

:func:`s3_environment` sets the variables a client of this server reads (dummy credentials, the
endpoint, plain HTTP) for the duration of a ``with`` block.
"""
import contextlib
import os
import re
import socket
import struct
import threading
import time
import uuid
from typing import Iterator, List, Optional

from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app
from werkzeug.serving import WSGIRequestHandler, make_server

from servers.range_server import Fault, ServerState

ACCESS_KEY, SECRET_KEY, REGION = 'mmgrasp-test-key', 'mmgrasp-test-secret', 'us-east-1'


class Logged:
    __slots__ = ('method', 'path', 'range', 'status')

    def __init__(self, method: str, path: str, byte_range: Optional[str]):
        self.method, self.path, self.range, self.status = method, path, byte_range, None

    def __repr__(self) -> str:
        return f'{self.method} {self.path} {self.range or ""} -> {self.status}'


def _reset(connection: socket.socket) -> None:
    with contextlib.suppress(OSError):
        connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack('ii', 1, 0))
        connection.close()


class _Handler(WSGIRequestHandler):
    def log(self, *args, **kwargs) -> None:  # quiet: requests, and the errors of resets
        pass

    def setup(self) -> None:
        super().setup()
        with self.server.owner.lock:
            self.server.owner.connections.add(self.connection)

    def finish(self) -> None:
        with self.server.owner.lock:
            self.server.owner.connections.discard(self.connection)
        with contextlib.suppress(OSError):
            super().finish()


class S3Server:
    """``with S3Server() as server: server.endpoint, server.bucket`` — an empty bucket of its own
    on moto's S3 until the block ends."""

    def __init__(self, bucket: Optional[str] = None):
        self.bucket = bucket or f'mmgrasp-{uuid.uuid4().hex[:12]}'
        self.state = ServerState()
        self.log: List[Logged] = []
        self.lock = threading.Lock()
        self.connections = set()
        self.dead = False
        self._app = DomainDispatcherApplication(create_backend_app)
        self._server = make_server('127.0.0.1', 0, self._wsgi, threaded=True,
                                   request_handler=_Handler)
        self._server.owner = self
        self._server.handle_error = lambda *args: None  # a client that gave up, a reset
        self._thread = threading.Thread(target=self._server.serve_forever,
                                        name='mmgrasp-s3-server', daemon=True)

    # ------------------------------------------------------------------------ serving
    def _wsgi(self, environ, start_response):
        method, path = environ['REQUEST_METHOD'], environ.get('PATH_INFO', '')
        entry = Logged(method, path, environ.get('HTTP_RANGE'))
        with self.lock:
            self.log.append(entry)
        connection = environ.get('werkzeug.socket')
        if self.dead:
            _reset(connection)
            return []
        fault = self.state.take_fault(path) if method in ('GET', 'HEAD') else None
        if fault is not None and fault.kind == 'reset':
            entry.status = 0
            _reset(connection)
            return []
        if fault is not None and fault.kind == 'stall':
            deadline = time.monotonic() + fault.seconds
            while time.monotonic() < deadline and not self.dead:
                time.sleep(0.02)
            if self.dead:
                _reset(connection)
                return []
        if fault is not None and fault.kind == 'status':
            entry.status = fault.status
            return self._error(start_response, fault.status, 'InternalError', 'injected fault')
        key = re.search(r'Credential=([^/]*)/', environ.get('HTTP_AUTHORIZATION', ''))
        if key is not None and key.group(1) != ACCESS_KEY:  # moto itself accepts any key
            entry.status = 403
            return self._error(start_response, 403, 'InvalidAccessKeyId',
                               'The AWS Access Key Id you provided does not exist in our records.')

        def recording(status, headers, exc_info=None):
            entry.status = int(status.split()[0])
            return start_response(status, headers, exc_info)

        body = b''.join(self._app(environ, recording))
        if fault is not None and fault.kind == 'short' and len(body) > 1:
            return self._short(body)
        return [body]

    @staticmethod
    def _error(start_response, status: int, code: str, message: str) -> List[bytes]:
        body = (f'<?xml version="1.0" encoding="UTF-8"?><Error><Code>{code}</Code>'
                f'<Message>{message}</Message></Error>').encode()
        start_response(f'{status} {code}', [('Content-Type', 'application/xml'),
                                             ('Content-Length', str(len(body)))])
        return [body]

    @staticmethod
    def _short(body: bytes) -> Iterator[bytes]:
        yield body[:len(body) // 2]
        raise ConnectionAbortedError('injected short answer')  # werkzeug drops the connection

    # ------------------------------------------------------------------------ control
    @property
    def endpoint(self) -> str:
        host, port = self._server.server_address[:2]
        return f'http://{host}:{port}'

    def url(self, *parts: str) -> str:
        return '/'.join([f's3://{self.bucket}', *parts]).rstrip('/')

    def inject(self, kind: str, match: str = '', count: int = 1, **kwargs) -> Fault:
        fault = Fault(kind, match, count, **kwargs)
        with self.state.lock:
            self.state.faults.append(fault)
        return fault

    def requests(self, match: str = '', method: Optional[str] = None) -> List[Logged]:
        with self.lock:
            return [e for e in self.log if match in e.path and method in (None, e.method)]

    def clear_log(self) -> None:
        with self.lock:
            self.log.clear()

    def kill(self) -> None:
        """Die as a killed server process does: nothing listens any more, and every open
        connection (an answer in progress included) ends with an RST."""
        self.dead = True
        self._server.shutdown()
        self._server.server_close()
        with self.lock:
            connections = list(self.connections)
        for connection in connections:
            with contextlib.suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)  # now, whoever holds the socket's files
            _reset(connection)

    def client(self):
        """A boto3 S3 client of this server (to place, replace and delete objects in tests)."""
        import boto3
        return boto3.client('s3', endpoint_url=self.endpoint, region_name=REGION,
                            aws_access_key_id=ACCESS_KEY, aws_secret_access_key=SECRET_KEY)

    def __enter__(self) -> 'S3Server':
        self._thread.start()
        self.client().create_bucket(Bucket=self.bucket)
        return self

    def __exit__(self, *exc) -> None:
        if not self.dead:
            with contextlib.suppress(Exception):
                client = self.client()
                for page in client.get_paginator('list_objects_v2').paginate(Bucket=self.bucket):
                    for item in page.get('Contents', []):
                        client.delete_object(Bucket=self.bucket, Key=item['Key'])
                client.delete_bucket(Bucket=self.bucket)
            self._server.shutdown()
            self._server.server_close()
        self._thread.join(timeout=10)


def s3_environment(server: S3Server, key: str = ACCESS_KEY, secret: str = SECRET_KEY) -> dict:
    """The environment variables of a client of ``server`` (obstore, botocore): dummy
    credentials, its endpoint, plain HTTP allowed, no instance-metadata lookups."""
    return {'AWS_ACCESS_KEY_ID': key, 'AWS_SECRET_ACCESS_KEY': secret,
            'AWS_DEFAULT_REGION': REGION, 'AWS_REGION': REGION,
            'AWS_ENDPOINT_URL': server.endpoint, 'AWS_ENDPOINT': server.endpoint,
            'AWS_ALLOW_HTTP': 'true', 'AWS_EC2_METADATA_DISABLED': 'true'}


@contextlib.contextmanager
def environment(variables: dict) -> Iterator[None]:
    """Set ``variables`` in ``os.environ`` for the block (for scripts; tests use monkeypatch)."""
    saved = {name: os.environ.get(name) for name in variables}
    os.environ.update(variables)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
