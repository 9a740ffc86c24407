"""`--serve` and `tlparse-py serve DIR`: a report folder over HTTP, and nothing outside it.

Every server here listens on loopback, is stopped by the test that started it (in a `finally`), and
every wait is bounded.
"""

from __future__ import annotations

import errno
import http.client
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from click.testing import CliRunner

from conftest import TRACES, read_json
from logs import cid, line, metrics
from tlparse_py.cli import main
from tlparse_py.commands.common import CliError
from tlparse_py.commands.request import ServeAt
from tlparse_py.commands.serve import Handler, ReportServer, open_server, requested_host, start

REPO = Path(__file__).resolve().parent.parent
SECRET = "TOP-SECRET-NEVER-SERVED"
SERVING = re.compile(r"^Serving (.+) at (http://127\.0\.0\.1:(\d+)/) (?:.*)?\(Ctrl-C to stop\)$", re.M)


@pytest.fixture(scope="module")
def written(tmp_path_factory) -> Path:
    """A real report, of the graph_break fixture."""
    from tlparse_py.pipeline import write_report

    out = tmp_path_factory.mktemp("serve") / "report"
    write_report(next((TRACES / "graph_break").glob("dedicated_log*")), out)
    return out


@pytest.fixture
def report(tmp_path, written) -> Path:
    """A copy of the report a test may change, beside a secret file it must never serve."""
    (tmp_path / "secret.txt").write_text(SECRET)
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "secret.txt").write_text(SECRET)
    folder = tmp_path / "report"
    shutil.copytree(written, folder)
    return folder


@contextmanager
def in_process(folder: Path, at: ServeAt | None = None) -> Iterator[ReportServer]:
    server = open_server(at or ServeAt(), folder)
    thread = start(server)
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)


def get(server: ReportServer, path: str, method: str = "GET") -> tuple[int, dict[str, str], bytes]:
    """One request with `path` sent exactly as given (no normalising client in between)."""
    host, port = server.server_address[:2]
    connection = http.client.HTTPConnection(str(host), int(port), timeout=10)
    try:
        connection.putrequest(method, path, skip_accept_encoding=True)
        connection.endheaders()
        response = connection.getresponse()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()
    finally:
        connection.close()


# -- nothing outside the folder ---------------------------------------------------------------------


def test_dot_dot_encoded_dot_dot_backslashes_and_absolute_paths_are_404(report, tmp_path):
    outside = tmp_path / "secret.txt"
    attempts = [
        "/../secret.txt", "/static/../../secret.txt", "/%2e%2e/secret.txt", "/%2E%2E/secret.txt", "/.%2e/secret.txt",
        "/static/%2e%2e/%2e%2e/secret.txt", "/static/..%2f..%2fsecret.txt", "/static/%2e%2e%2f%2e%2e%2fsecret.txt",
        "/%252e%252e/secret.txt", "/..%5csecret.txt", "/static\\..\\..\\secret.txt", "/static%5c..%5c..%5csecret.txt",
        "/" + str(outside), "//" + str(outside), "/%2f" + str(outside).lstrip("/").replace("/", "%2f"),
        str(outside), f"http://127.0.0.1/{outside}", "/..", "/../", "/static/..%00/secret.txt", "/%ff%fe",
        "/.tlparse-py-report", "/outside/secret.txt",
    ]
    with in_process(report) as server:
        for path in attempts:
            status, _, body = get(server, path)
            assert status == 404, path
            assert SECRET.encode() not in body, path
        # the same paths with HEAD: 404 too, no body
        for path in attempts[:6]:
            assert get(server, path, "HEAD")[0] == 404, path


def test_a_symlink_out_of_the_folder_is_404_and_one_inside_it_is_followed(report, tmp_path):
    (report / "escape.txt").symlink_to(tmp_path / "secret.txt")
    (report / "escape_relative.txt").symlink_to(Path("..") / "secret.txt")
    (report / "escape_dir").symlink_to(tmp_path / "outside", target_is_directory=True)
    (report / "root_link").symlink_to("/", target_is_directory=True)
    (report / "inside.html").symlink_to(report / "index.html")
    (report / "inside_dir").symlink_to("static", target_is_directory=True)
    with in_process(report) as server:
        for path in ["/escape.txt", "/escape_relative.txt", "/escape_dir/secret.txt", "/escape_dir/", "/escape_dir",
                     "/root_link/etc/hostname", "/root_link/" + str(tmp_path / "secret.txt").lstrip("/")]:
            status, _, body = get(server, path)
            assert status == 404 and SECRET.encode() not in body, path
        status, headers, body = get(server, "/inside.html")
        assert status == 200 and body == (report / "index.html").read_bytes()
        assert get(server, "/inside_dir/report.js")[2] == (report / "static" / "report.js").read_bytes()
        # a symlink swapped in after the report was served: resolved again on this request
        (report / "summary.md").unlink()
        (report / "summary.md").symlink_to(tmp_path / "secret.txt")
        status, _, body = get(server, "/summary.md")
        assert status == 404 and SECRET.encode() not in body


def test_folders_are_their_index_and_are_never_listed(report):
    (report / "static" / "index.html").unlink(missing_ok=True)
    with in_process(report) as server:
        assert get(server, "/static/")[0] == 404  # no index.html: no listing
        status, headers, _ = get(server, "/-_0_0_1")
        assert status == 301 and headers["location"] == "/-_0_0_1/"  # relative links need the slash
        status, _, body = get(server, "/-_0_0_1/")
        assert status == 200 and body == (report / "-_0_0_1" / "index.html").read_bytes() and b"<title>Compile [0/0_1]" in body
        assert get(server, "/index.html/")[0] == 404  # a file is not a folder


def test_only_get_and_head_and_every_answer_has_its_type_nosniff_and_no_cache(report):
    (report / "picture.png").write_bytes(b"\x89PNG\r\n\x1a\n")
    (report / "picture.svg").write_text("<svg xmlns='http://www.w3.org/2000/svg'/>")
    payload = next((report / "-_0_0_1").glob("*.txt")).name
    expected = {
        "/": "text/html; charset=utf-8", "/index.html": "text/html; charset=utf-8",
        "/static/report.js": "text/javascript; charset=utf-8", "/static/report.css": "text/css; charset=utf-8",
        "/summary.json": "application/json; charset=utf-8", f"/-_0_0_1/{payload}": "text/plain; charset=utf-8",
        "/picture.png": "image/png", "/picture.svg": "image/svg+xml", "/raw.log": "text/plain; charset=utf-8",
    }
    with in_process(report) as server:
        for path, content_type in expected.items():
            status, headers, body = get(server, path)
            assert status == 200, path
            assert headers["content-type"] == content_type, path
            assert headers["x-content-type-options"] == "nosniff" and headers["cache-control"] == "no-cache", path
            assert int(headers["content-length"]) == len(body)
        status, headers, body = get(server, "/index.html", "HEAD")
        assert status == 200 and body == b"" and int(headers["content-length"]) == (report / "index.html").stat().st_size
        for method in ("POST", "PUT", "DELETE", "OPTIONS"):
            status, headers, _ = get(server, "/index.html", method)
            assert status == 405 and headers["allow"] == "GET, HEAD", method
        status, headers, _ = get(server, "/nothing-here.html")
        assert status == 404 and headers["x-content-type-options"] == "nosniff"
        assert "python" not in get(server, "/")[1]["server"].lower()


def test_a_page_rewritten_in_place_is_served_fresh_and_the_query_is_ignored(report):
    """What a live report's poll does: `live.js?<time>` each second, the file replaced between polls."""
    live = report / "live.js"
    live.write_text("tlparseLive({pages: {}});")
    with in_process(report) as server:
        status, headers, body = get(server, "/live.js?1700000000000")
        assert status == 200 and body == live.read_bytes() and headers["cache-control"] == "no-cache"
        staged = report / "live.js.new"
        staged.write_text("tlparseLive({pages: {'index.html': 'v2'}});")
        os.replace(staged, live)  # as the live report writes: atomically
        assert get(server, "/live.js?1700000001000")[2] == live.read_bytes()
        live.unlink()  # the final report has no live.js: the page's script reloads on the error
        assert get(server, "/live.js?1700000002000")[0] == 404
        # the whole folder replaced (watch's final report is renamed into place): the new one is served
        old = report.with_name("report.old")
        report.rename(old)
        shutil.copytree(old, report)
        (report / "index.html").write_text("<title>replaced</title>")
        assert get(server, "/")[2] == b"<title>replaced</title>"


# -- hostile requests: other hosts (DNS rebinding), other methods, bodies ---------------------------------


def raw(server: ReportServer, request: bytes) -> tuple[int, dict[str, str], bytes]:
    """`request` sent byte for byte (no client adds a Host), and the one answer read."""
    with socket.create_connection(tuple(server.server_address[:2]), timeout=10) as sock:
        sock.sendall(request)
        response = http.client.HTTPResponse(sock, method=request.split(b" ", 1)[0].decode())
        response.begin()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()


def request_for(host: str | None, target: str = "/", method: str = "GET", version: str = "HTTP/1.1", extra: str = "") -> bytes:
    host_line = "" if host is None else f"Host: {host}\r\n"
    return f"{method} {target} {version}\r\n{host_line}{extra}Connection: close\r\n\r\n".encode("latin-1")


REBOUND = ["rebind.attacker.example:{port}", "rebind.attacker.example", "REBIND.ATTACKER.EXAMPLE:{port}", "attacker.example.:{port}",
           "localhost.attacker.example:{port}", "127.0.0.1.attacker.example", "foo.localhost:{port}", "localhost..:{port}",
           "127.1:{port}", "2130706433:{port}", "0x7f000001", "0.0.0.0:{port}", "10.0.0.1:{port}", "[::ffff:10.0.0.1]:{port}",
           "[fe80::1]:{port}", "[::]:{port}"]


def test_a_request_for_another_host_is_421_whatever_its_form(report):
    """DNS rebinding: a page at rebind.attacker.example:PORT, its name pointed at 127.0.0.1, must not read the report."""
    index = (report / "index.html").read_bytes()
    with in_process(report) as server:
        port = server.server_address[1]
        for host in REBOUND:
            for target in ("/", "/summary.json", "/-_0_0_1/"):
                status, headers, body = raw(server, request_for(host.format(port=port), target))
                assert status == 421, (host, target)
                assert b"graph_break" not in body and body != index and headers["x-content-type-options"] == "nosniff", host
            assert raw(server, request_for(host.format(port=port), method="HEAD"))[0] == 421, host
            assert raw(server, request_for(host.format(port=port), method="PROPFIND"))[0] == 421, host  # the host first
        # an absolute-form target names the host, whatever Host says (RFC 9112 3.2.2)
        for target in ("http://evil/", f"http://evil:{port}/index.html", "HTTP://rebind.attacker.example/summary.json",
                       f"https://evil.example:{port}/", "http://127.0.0.1.evil/"):
            status, _, body = raw(server, request_for(f"127.0.0.1:{port}", target))
            assert status == 421 and b"graph_break" not in body, target
        # HTTP/1.0 says Host too when it has one
        assert raw(server, request_for("rebind.attacker.example", version="HTTP/1.0"))[0] == 421


def test_loopback_names_and_addresses_are_answered_in_every_spelling(report):
    index = (report / "index.html").read_bytes()
    with in_process(report) as server:
        port = server.server_address[1]
        for host in [f"127.0.0.1:{port}", "127.0.0.1", "127.0.0.1:9000", f"localhost:{port}", "localhost", "LOCALHOST:{port}",
                     f"LocalHost.:{port}", "localhost.", "localhost:", f"[::1]:{port}", "[::1]", "[0:0:0:0:0:0:0:1]:8000",
                     f"[::ffff:127.0.0.1]:{port}", f"127.0.0.2:{port}", f"127.255.255.254:{port}"]:  # 9000: an SSH tunnel's port
            status, headers, body = raw(server, request_for(host.replace("{port}", str(port))))
            assert status == 200 and body == index, host
        # absolute-form, for this server: served as its path (and Host is overridden by it)
        status, _, body = raw(server, request_for("rebind.attacker.example", f"http://127.0.0.1:{port}/summary.json"))
        assert status == 200 and body == (report / "summary.json").read_bytes()
        assert raw(server, request_for(f"localhost:{port}", "http://LOCALHOST."))[2] == index
        assert raw(server, request_for(f"localhost:{port}", f"http://[::1]:{port}?x=1"))[2] == index
        assert raw(server, request_for("localhost", f"http://127.0.0.1:{port}/../secret.txt"))[0] == 404


def test_a_missing_malformed_or_doubled_host_is_400_and_http_1_0_may_omit_it(report, tmp_path):
    index = (report / "index.html").read_bytes()
    with in_process(report) as server:
        port = server.server_address[1]
        assert raw(server, request_for(None))[0] == 400  # HTTP/1.1 must send Host (RFC 9112 3.2)
        for host in ["", " ", "user@localhost", f"evil@127.0.0.1:{port}", "localhost:abc", "localhost:80:80", "[::1", "::1",
                     "[::g]", "[fe80::1%25eth0]", "localhost/x", "local host", "localhost\\", f"localhost:{port}, evil"]:
            status, _, body = raw(server, request_for(host))
            assert status == 400 and body != index, repr(host)
        two = raw(server, request_for(f"127.0.0.1:{port}", extra="Host: rebind.attacker.example\r\n"))
        assert two[0] == 400
        assert raw(server, request_for("localhost", extra="Host: localhost\r\n"))[0] == 400
        assert raw(server, request_for("localhost", "ftp://localhost/"))[0] == 400
        # HTTP/1.0 may omit Host, and no browser does: served
        status, _, body = raw(server, request_for(None, version="HTTP/1.0"))
        assert status == 200 and body == index


def test_the_host_name_given_with_host_is_answered_and_no_other(report):
    """`--host NAME` where NAME is an address of this machine's loopback (as /etc/hosts often maps the machine's own name)."""
    server = ReportServer(("127.0.0.1", 0), socket.AF_INET, report, "DevBox.Example.")
    thread = start(server)
    try:
        port = server.server_address[1]
        for host in (f"devbox.example:{port}", "DEVBOX.EXAMPLE.", "localhost", f"127.0.0.1:{port}"):
            assert raw(server, request_for(host))[0] == 200, host
        for host in ("other.example", "devbox.example.evil", "evil.devbox.example"):
            assert raw(server, request_for(host))[0] == 421, host
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)
    # the real thing: `--host <this machine's name>`, which /etc/hosts often maps to a loopback address
    name = socket.gethostname()
    try:
        bound = open_server(ServeAt(name), report)
    except CliError:
        return  # this machine's name does not resolve here
    thread = start(bound)
    try:
        assert raw(bound, request_for(f"{name}:{bound.server_address[1]}"))[0] == 200
        # on a non-loopback address Host is not checked: anyone who can reach it may read the report
        assert raw(bound, request_for("rebind.attacker.example"))[0] == (421 if bound.loopback else 200)
    finally:
        bound.shutdown()
        bound.server_close()
        thread.join(10)


def test_requested_host_reads_each_form():
    assert requested_host("/", ["LocalHost.:8000"], "HTTP/1.1") == "localhost"
    assert requested_host("/", ["[0::1]:8000"], "HTTP/1.1") == "::1"
    assert requested_host("http://Evil.Example:80/x", ["localhost"], "HTTP/1.1") == "evil.example"
    assert requested_host("/", [], "HTTP/1.0") is None
    for target, hosts, version in [("/", [], "HTTP/1.1"), ("/", ["a", "b"], "HTTP/1.0"), ("/", ["a b"], "HTTP/1.1"),
                                   ("file:///etc/passwd", ["localhost"], "HTTP/1.1")]:
        with pytest.raises(ValueError):
            requested_host(target, hosts, version)


@pytest.mark.parametrize("method", ["PROPFIND", "MKCOL", "LOCK", "UNLOCK", "COPY", "MOVE", "QUERY", "SEARCH", "PROPPATCH", "REPORT",
                                    "BREW", "M-SEARCH", "get", "Head", "FOO_BAR", "POST", "PUT", "DELETE", "PATCH", "OPTIONS",
                                    "TRACE", "CONNECT"])
def test_every_method_but_get_and_head_is_405_with_allow(report, method):
    with in_process(report) as server:
        port = server.server_address[1]
        target = f"127.0.0.1:{port}" if method == "CONNECT" else "/index.html"
        status, headers, body = raw(server, request_for(f"127.0.0.1:{port}", target, method))
        assert status == 405 and headers["allow"] == "GET, HEAD" and body == b"", method
        assert headers["x-content-type-options"] == "nosniff" and headers["connection"] == "close"


def test_a_body_is_never_read_nor_taken_for_the_next_request(report):
    """A body the server does not read (on 405, or sent with a GET) ends the connection after the answer:
    a second request hidden in it is never answered. No `100 Continue` is sent for a body it will not read."""
    with in_process(report) as server:
        port = server.server_address[1]
        hidden = f"GET /summary.json HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode()
        for head in (f"POST /index.html HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Length: {len(hidden)}\r\n\r\n",
                     f"GET /index.html HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Length: {len(hidden)}\r\n\r\n",
                     f"GET /index.html HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nTransfer-Encoding: chunked\r\n\r\n",
                     f"PUT /x HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nExpect: 100-continue\r\nContent-Length: {len(hidden)}\r\n\r\n"):
            with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
                sock.sendall(head.encode() + hidden)
                received = b"".join(iter(lambda: sock.recv(1 << 16), b""))
            assert received.count(b"HTTP/1.1 ") == 1 and b"100 Continue" not in received, head


def test_every_answer_says_same_origin_only(report):
    """Cross-Origin-Resource-Policy: another site's page cannot <script src> the search index (which sets a
    global) to read the report's paths and code, whatever the Host check lets through."""
    with in_process(report) as server:
        port = server.server_address[1]
        for request in (request_for(f"127.0.0.1:{port}", "/static/search-index.js"), request_for(f"127.0.0.1:{port}", "/nothing"),
                        request_for(f"127.0.0.1:{port}", method="PROPFIND"), request_for("evil.example"), request_for(None)):
            assert raw(server, request)[1]["cross-origin-resource-policy"] == "same-origin", request


@pytest.fixture(scope="module")
def vllm_report(tmp_path_factory) -> Path:
    from tlparse_py.pipeline import write_report

    out = tmp_path_factory.mktemp("serve-vllm") / "report"
    write_report(next((TRACES / "vllm_piecewise").glob("dedicated_log*")), out)
    return out


def test_text_the_report_writes_is_shown_as_text_never_downloaded(vllm_report, tmp_path):
    """A vLLM report's pattern dumps (.py) and every other text file are text/plain (or their text type), with nosniff."""
    report = tmp_path / "report"
    shutil.copytree(vllm_report, report)
    patterns = sorted(p.relative_to(report).as_posix() for p in report.rglob("vllm_patterns.*.py"))
    assert patterns, "the vLLM fixture's report has pattern dumps"
    (report / "kernel.cpp").write_text("int main() { return 0; }  // a plugin's kind may write any extension: é\n")
    (report / "NOTES").write_text("plain text, no extension\n")
    (report / "SHOUTED.PY").write_text("x = 1\n")
    (report / "blob.bin").write_bytes(b"\x00\x01\x02\xff")
    (report / "latin.dat").write_bytes("caf\xe9 au lait".encode("latin-1"))
    (report / "picture.png").write_bytes(b"\x89PNG\r\n\x1a\n")
    types = {path.relative_to(report).as_posix(): path.suffix for path in report.rglob("*") if path.is_file() and not path.name.startswith(".")}
    text = "text/plain; charset=utf-8"
    expected = {".html": "text/html; charset=utf-8", ".js": "text/javascript; charset=utf-8", ".css": "text/css; charset=utf-8",
                ".json": "application/json; charset=utf-8", ".png": "image/png", ".bin": "application/octet-stream",
                ".dat": "application/octet-stream"}
    with in_process(report) as server:
        for path, suffix in sorted(types.items()):
            status, headers, body = get(server, "/" + path)
            assert status == 200 and body == (report / path).read_bytes(), path
            assert headers["content-type"] == expected.get(suffix.lower(), text), path
            assert headers["x-content-type-options"] == "nosniff", path
        assert {types[p] for p in types} >= {".py", ".txt", ".json", ".md", ".log", ".jsonl", ".html", ".js", ".css"}
        for path in patterns:
            assert get(server, "/" + path, "HEAD")[1]["content-type"] == text, path


# -- where it listens ---------------------------------------------------------------------------------


def non_loopback_addresses() -> list[str]:
    """This machine's IPv4 addresses that are not loopback (none in a sandbox without a network)."""
    found = set()
    try:
        for address in socket.gethostbyname_ex(socket.gethostname())[2]:
            found.add(address)
    except OSError:
        pass
    probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        probe.connect(("192.0.2.1", 9))  # UDP: only a route lookup, nothing is sent
        found.add(probe.getsockname()[0])
    except OSError:
        pass
    finally:
        probe.close()
    return sorted(a for a in found if not a.startswith("127.") and a != "0.0.0.0")


def test_it_listens_on_loopback_only_unless_told(report):
    with in_process(report) as server:
        assert server.socket.getsockname()[0] == "127.0.0.1" and server.loopback
        assert 8000 <= server.server_address[1] <= 8099 or server.server_address[1] > 1024
        assert get(server, "/")[0] == 200
        port = server.server_address[1]
        for address in non_loopback_addresses():
            with pytest.raises(OSError) as refused:
                socket.create_connection((address, port), timeout=2).close()
            assert isinstance(refused.value, (ConnectionRefusedError, TimeoutError)) or refused.value.errno in (
                errno.ECONNREFUSED, errno.EHOSTUNREACH, errno.ENETUNREACH), address


def test_without_port_it_takes_the_next_free_port_of_8000_to_8099(report):
    with in_process(report) as first:
        with in_process(report) as second:
            ports = first.server_address[1], second.server_address[1]
            assert ports[0] != ports[1]
            if 8000 <= ports[0] < 8099:
                assert 8000 <= ports[1] <= 8099


@contextmanager
def busy_port() -> Iterator[int]:
    holder = socket.socket()
    holder.bind(("127.0.0.1", 0))
    holder.listen()
    try:
        yield holder.getsockname()[1]
    finally:
        holder.close()


def tlparse(*args: str, cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tlparse_py", *args], cwd=cwd, capture_output=True, text=True, timeout=timeout)


def test_a_port_in_use_is_one_line_and_exit_2_before_anything_is_written(report, tmp_path):
    with busy_port() as port:
        done = tlparse("serve", str(report), "--port", str(port), cwd=tmp_path)
        assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
        assert f"--port {port}: the port is in use" in done.stderr and "Traceback" not in done.stderr
        done = tlparse(str(TRACES / "graph_break"), "-o", "out", "--serve", "--port", str(port), cwd=tmp_path)
        assert done.returncode == 2 and done.stderr.count("\n") == 1 and "in use" in done.stderr, done.stderr
        assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("command", ["serve", "report", "watch"])
@pytest.mark.parametrize("port", ["0", "70000", "65536", "-1", "http"])
def test_a_port_out_of_range_is_a_usage_error(report, tmp_path, command, port):
    if command == "serve":
        args = ["serve", str(report)]
    else:
        args = [command, str(TRACES / "graph_break"), "-o", str(tmp_path / "out"), "--serve"]
    result = CliRunner().invoke(main, [*args, "--port", port])
    assert result.exit_code == 2 and "--port" in result.output, result.output
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("option", [["--port", "8123"], ["--host", "0.0.0.0"]])
def test_port_and_host_without_serve_are_a_usage_error(tmp_path, option):
    result = CliRunner().invoke(main, [str(TRACES / "graph_break"), "-o", str(tmp_path / "out"), "--no-browser", *option])
    assert result.exit_code == 2 and "add --serve" in result.output
    assert not (tmp_path / "out").exists()


def test_a_host_that_is_not_of_this_machine_is_exit_2(report, tmp_path):
    done = tlparse("serve", str(report), "--host", "192.0.2.1", cwd=tmp_path)  # TEST-NET-1: never this machine's
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "--host 192.0.2.1" in done.stderr, done.stderr


def test_serve_refuses_a_folder_that_is_not_a_report(tmp_path):
    (tmp_path / "empty").mkdir()
    (tmp_path / "home").mkdir()
    (tmp_path / "home" / "notes.txt").write_text(SECRET)
    (tmp_path / "repo").mkdir()
    (tmp_path / "repo" / "index.html").write_text("<p>")
    (tmp_path / "repo" / ".git").mkdir()
    (tmp_path / "file").write_text("x")
    for folder in ("empty", "home", "repo", "file", "missing"):
        done = tlparse("serve", str(tmp_path / folder), cwd=tmp_path)
        assert done.returncode == 2 and done.stderr.count("\n") == 1, (folder, done.stderr)
        assert "Serving" not in done.stderr and "Traceback" not in done.stderr


# -- the command, stopped by Ctrl-C or SIGTERM ------------------------------------------------------------


@contextmanager
def running(*args: str, cwd: Path, env: dict[str, str] | None = None, shell: bool = False) -> Iterator[tuple[subprocess.Popen, Path]]:
    """The command in the background (its own process group), its stderr in a file; killed if still running at the end."""
    err = cwd / f"stderr-{time.monotonic_ns()}.txt"
    command = ["bash", "-c", args[0]] if shell else [sys.executable, "-m", "tlparse_py", *args]
    with open(err, "w") as handle:
        process = subprocess.Popen(command, cwd=cwd, stdout=subprocess.DEVNULL, stderr=handle, text=True, env=env,
                                   start_new_session=True)
    try:
        yield process, err
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(10)


def wait_for_url(process: subprocess.Popen, err: Path, timeout: float = 120) -> tuple[str, int]:
    """The URL the `Serving ... at URL` line names, once it is printed."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        text = err.read_text()
        match = SERVING.search(text)
        if match:
            return match.group(2), int(match.group(3))
        assert process.poll() is None, f"exited {process.returncode}: {text}"
        time.sleep(0.05)
    raise AssertionError(f"no Serving line: {err.read_text()}")


def fetch(port: int, path: str = "/") -> tuple[int, bytes]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        connection.request("GET", path)
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        connection.close()


def stop(process: subprocess.Popen, err: Path, sig: int) -> str:
    os.killpg(process.pid, sig)
    process.wait(timeout=30)
    return err.read_text()


@pytest.mark.parametrize("sig, code, says", [(signal.SIGINT, 0, "stopped serving"), (signal.SIGTERM, 143, "Terminated (SIGTERM): stopped serving")])
def test_ctrl_c_and_sigterm_stop_serving_with_one_line_and_no_traceback(report, tmp_path, sig, code, says):
    with running("serve", str(report), cwd=tmp_path) as (process, err):
        url, port = wait_for_url(process, err)
        status, body = fetch(port)
        assert status == 200 and b"tlparse-py report" in body
        text = stop(process, err, sig)
    assert process.returncode == code, text
    assert "Traceback" not in text and text.splitlines()[-1].startswith(says), text
    assert len(text.splitlines()) == 2  # the Serving line, then the one that says it stopped
    with pytest.raises(OSError):  # the port is closed
        fetch(port)


def test_report_serve_writes_the_report_then_serves_it_and_opens_no_browser(tmp_path):
    env = {**os.environ, "BROWSER": f"{sys.executable} -c 'open(\"{tmp_path / 'browser-opened'}\", \"w\")'"}
    with running(str(TRACES / "graph_break"), "-o", "out", "--serve", cwd=tmp_path, env=env) as (process, err):
        url, port = wait_for_url(process, err)
        before = err.read_text()
        assert before.index("Report: ") < before.index("Serving ")  # once written
        for compile in read_json(tmp_path / "out" / "summary.json")["compiles"]:
            status, body = fetch(port, "/" + compile["url"])
            assert status == 200 and body == (tmp_path / "out" / compile["url"]).read_bytes() and b"<title>Compile " in body
        text = stop(process, err, signal.SIGINT)
    assert process.returncode == 0 and "Traceback" not in text
    assert not (tmp_path / "browser-opened").exists()


def test_a_failed_check_exits_with_its_code_and_serves_nothing(tmp_path):
    done = tlparse(str(TRACES / "graph_break"), "-o", "out", "--serve", "--fail-on", "graph_breaks>0", cwd=tmp_path)
    assert done.returncode == 3 and "Serving" not in done.stderr, done.stderr
    assert (tmp_path / "out" / "index.html").is_file()


def test_watch_serve_serves_the_live_report_then_the_final_one(tmp_path):
    writer = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    try:
        log = tmp_path / "dedicated_log_torch_trace_x.log"
        start_line = line({"dynamo_start": {"stack": [{"line": 3, "name": "f", "filename": 0}]}, **cid(0)}, pid=writer.pid)
        log.write_text(start_line)
        with running("watch", str(log), "-o", "out", "--serve", "--interval", "0.1", "--quiet-s", "0.3", cwd=tmp_path) as (process, err):
            url, port = wait_for_url(process, err)
            deadline = time.monotonic() + 60
            # 404 until the first update is written: its pages, then live.js, which lists them (a busy
            # machine may answer between the two)
            while b"tlparse-live" not in fetch(port)[1] or fetch(port, f"/live.js?{time.time_ns()}")[0] != 200:
                assert time.monotonic() < deadline and process.poll() is None, err.read_text()
                time.sleep(0.1)
            status, live = fetch(port, f"/live.js?{time.time_ns()}")
            assert status == 200 and b"tlparseLive" in live
            with open(log, "a") as handle:
                handle.write(metrics(0).replace(" 4242 ", f" {writer.pid} "))
            writer.kill()
            writer.wait()
            while "is final" not in err.read_text():
                assert time.monotonic() < deadline and process.poll() is None, err.read_text()
                time.sleep(0.1)
            status, index = fetch(port)
            assert status == 200 and b"tlparse-live" not in index  # the final report, through the same server
            assert fetch(port, f"/live.js?{time.time_ns()}")[0] == 404  # so an open page reloads into it
            text = stop(process, err, signal.SIGINT)
        assert process.returncode == 0 and "Traceback" not in text, text
    finally:
        writer.kill()
        writer.wait()


# -- the README's commands, as written ------------------------------------------------------------------


def test_the_readme_serving_commands_run_as_written(tmp_path):
    """Each line of the README's "Serving a report" block, verbatim, in a shell with $TORCH_TRACE set:
    it prints the URL, serves the report, and Ctrl-C ends it with exit 0."""
    readme = (REPO / "README.md").read_text()
    block = re.search(r"## Serving a report\n.*?```bash\n(.*?)```", readme, re.S).group(1)
    commands = [text.split("  #")[0].strip() for text in block.strip().splitlines()]
    assert commands == ['tlparse-py "$TORCH_TRACE" --serve', "tlparse-py serve tl_out --port 8123"]
    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.1", 8123))
        except OSError:
            pytest.skip("port 8123, which the README names, is in use on this machine")
    env = {**os.environ, "TORCH_TRACE": str(TRACES / "graph_break"),
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    for number, command in enumerate(block.strip().splitlines()):
        with running(command, cwd=tmp_path, env=env, shell=True) as (process, err):
            url, port = wait_for_url(process, err)
            assert number == 0 or port == 8123
            status, body = fetch(port)
            assert status == 200 and b"tlparse-py report" in body
            text = stop(process, err, signal.SIGINT)
        assert process.returncode == 0 and "Traceback" not in text, text
        assert SERVING.search(text).group(1) == "tl_out"


# -- a real browser, through the server ---------------------------------------------------------------------


@pytest.mark.browser
def test_a_browser_loads_the_index_and_a_compile_page_through_the_server(report, monkeypatch):
    playwright_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed (pip install -e '.[test]')")
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        pytest.skip("chromium is not installed (apt-get install chromium)")
    args = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
            "--disable-component-update", "--disable-sync"]
    compile = read_json(report / "summary.json")["compiles"][0]
    not_found: list[str] = []
    send_error = Handler.send_error

    def recorded(self, code, *args, **kwargs):
        not_found.append(self.path)
        send_error(self, code, *args, **kwargs)

    monkeypatch.setattr(Handler, "send_error", recorded)
    with in_process(report) as server, playwright_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=args, headless=True)
        try:
            page = browser.new_page()
            errors: list[str] = []
            page.on("console", lambda m: m.type in ("error", "warning") and errors.append(f"console {m.type}: {m.text}"))
            page.on("pageerror", lambda e: errors.append(f"pageerror: {e}"))
            page.on("requestfailed", lambda r: errors.append(f"requestfailed: {r.url}"))
            page.on("response", lambda r: r.status >= 400 and errors.append(f"{r.status}: {r.url}"))
            page.goto(server.url, wait_until="load")
            assert page.title().startswith("tlparse-py report")
            assert compile["id"] in page.locator("body").inner_text()
            page.locator(f'a[href="{compile["url"]}"]').first.click()
            page.wait_for_load_state("load")
            assert page.url == server.url + compile["url"]
            assert page.title().startswith(f"Compile {compile['id'][:-1]}")  # [0/0]'s last attempt: [0/0_1]
            assert compile["graph_breaks"][0]["reason"] in page.locator("body").inner_text()
            # the page's stylesheet and script were accepted (nosniff: a wrong type would be refused)
            assert page.evaluate("getComputedStyle(document.body).fontFamily") != ""
            assert page.evaluate("document.styleSheets.length") >= 1
            # the one thing missing: the browser's own request for /favicon.ico (a report has none)
            assert set(not_found) <= {"/favicon.ico"}, not_found
            assert [e for e in errors if "status of 404" not in e] == [], errors
        finally:
            browser.close()


@pytest.mark.browser
def test_a_browser_on_a_rebound_name_or_another_site_reads_nothing(report):
    """The two ways a web page reaches a loopback server through the user's browser: a name of the
    attacker's resolved to 127.0.0.1 (DNS rebinding: 421), and `<script src>` of the report's search
    index from the attacker's own origin (Cross-Origin-Resource-Policy: blocked)."""
    playwright_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed (pip install -e '.[test]')")
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        pytest.skip("chromium is not installed (apt-get install chromium)")
    attacker = report.parent / "attacker"
    attacker.mkdir()
    (attacker / "index.html").write_text("<p>attacker</p>")
    (attacker / ".tlparse-py-report").write_text("")
    with in_process(report) as server, in_process(attacker) as other, playwright_api.sync_playwright() as p:
        port = server.server_address[1]
        args = ["--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
                "--host-resolver-rules=MAP rebind.attacker.example 127.0.0.1"]
        browser = p.chromium.launch(executable_path=chromium, args=args, headless=True)
        try:
            page = browser.new_page()
            response = page.goto(f"http://rebind.attacker.example:{port}/summary.json")
            assert response is not None and response.status == 421 and "compiles" not in page.content()
            page.goto(f"http://localhost:{other.server_address[1]}/")  # another site than 127.0.0.1
            shard = next((report / "static" / "search").glob("*.js")).name
            page.evaluate("""url => new Promise(done => { const s = document.createElement('script');
                s.src = url; s.onload = s.onerror = () => done(); document.head.appendChild(s); })""",
                          f"http://127.0.0.1:{port}/static/search/{shard}")
            assert page.evaluate("typeof window.TLPARSE_SEARCH") == "undefined"
        finally:
            browser.close()


@pytest.mark.parametrize("live", [[], ["--live"]], ids=["one-shot", "live"])
def test_run_serve_serves_the_programs_report_until_ctrl_c(tmp_path, live):
    """`tlparse-py run --serve COMMAND`: the port is taken first, the report written once the
    program ends is served, and Ctrl-C ends serving (exit 0)."""
    log = "".join([line({"dynamo_start": {"stack": []}, **cid(0, 0, 0)}),
                   line({"compilation_metrics": {"co_name": "f", "entire_frame_compile_time_s": 0.25, "graph_op_count": 1}, **cid(0, 0, 0)})])
    program = tmp_path / "prog.py"
    program.write_text("import os\nopen(os.path.join(os.environ['TORCH_TRACE'], 'dedicated_log_torch_trace_p.log'), 'w').write("
                       f"{log!r}.replace(' 4242 ', ' %d ' % os.getpid()))\n")
    with running("run", "--serve", "-o", "out", *live, sys.executable, "prog.py", cwd=tmp_path) as (process, err):
        _, port = wait_for_url(process, err)
        deadline = time.monotonic() + 60
        while "Serving" not in err.read_text().split("(Ctrl-C to stop)", 1)[-1] and time.monotonic() < deadline:
            time.sleep(0.1)  # the second Serving line: the report is written and served
        status, body = fetch(port, "/index.html")
        assert status == 200 and b"tlparse-py report" in body and b"[0/0]" in body
        text = stop(process, err, signal.SIGINT)
    assert process.returncode == 0 and "Traceback" not in text
