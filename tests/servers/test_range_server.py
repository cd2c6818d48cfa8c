"""The test range server: its folder and nothing outside it."""
import http.client

import pytest

from servers.range_server import RangeServer


@pytest.mark.parametrize('path', ['/%2e%2e/secret.txt', '/../secret.txt',
                                  '/sub/%2E%2E/%2e%2e/secret.txt', '/%2fsecret.txt',
                                  '/link/secret.txt'])
def test_no_path_leaves_the_served_folder(tmp_path, path):
    (tmp_path / 'secret.txt').write_bytes(b'outside the served folder')
    served = tmp_path / 'served'
    (served / 'sub').mkdir(parents=True)
    (served / 'inside.txt').write_bytes(b'served')
    (served / 'link').symlink_to(tmp_path)
    with RangeServer(str(served)) as server:
        host, port = server.url[len('http://'):].split(':')
        connection = http.client.HTTPConnection(host, int(port), timeout=5)
        connection.request('GET', path)
        answer = connection.getresponse()
        body = answer.read()
        connection.request('GET', '/inside.txt')
        inside = connection.getresponse()
        assert (inside.status, inside.read()) == (200, b'served')
        connection.close()
    assert answer.status == 404 and b'outside' not in body, (path, answer.status, body)
