"""`tlparse-py serve [DIR]` and `--serve`: a report folder over HTTP, for a report written on a
remote machine (reach it through an SSH tunnel) or a browser that will not open `file://`.

What is served, and nothing else: the regular files inside the folder, read with GET or HEAD. The
folder is resolved again on every request (`watch` replaces it with the final report), and so is
each path: `..` (raw or percent-encoded), backslashes, NUL bytes, names starting with a dot, and
any path that resolves (through a symlink) outside the folder are 404, as is anything that is not a
regular file. A folder is its index.html; there are no listings. Every answer says
`Cache-Control: no-cache` (a live report rewrites its pages in place),
`X-Content-Type-Options: nosniff` and `Cross-Origin-Resource-Policy: same-origin` (another site's
page cannot load the report's scripts, such as the search index, into itself to read them), with the
content type of its extension; text the browser should show (code dumps, logs, Markdown, an
extension not known here whose start is UTF-8 text) is text/plain. Any method but GET and HEAD: 405.

DNS rebinding: a web page whose name its attacker points at 127.0.0.1 would otherwise read the report
through the user's browser. So a server on a loopback address answers only requests for a loopback
name or address (`localhost`, `127.0.0.1`, `[::1]`..., any port: an SSH tunnel changes it) or the
--host name; others are 421. HTTP/1.1 must send Host (400 otherwise); HTTP/1.0 may omit it (no
browser does). On any other address, which anyone who can reach it may read, Host is not checked:
the names the machine goes by are not known here (as Jupyter's allow_remote_access does).

The server listens on 127.0.0.1 unless --host says otherwise (then anyone who can reach that
address can read the report: a warning says so). Without --port it takes the first free port of
8000-8099, as tlparse does, else one the system picks; a --port in use is one line, exit 2.
Ctrl-C stops serving: one line, exit 0 (stopping is how serving ends, not an interrupted run);
SIGTERM: one line, exit 143, as for the report.
"""

from __future__ import annotations

import codecs
import errno
import ipaddress
import os
import re
import signal
import socket
import socketserver
import stat
import threading
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote

import click

from .. import shutdown
from ..report.targets import looks_like_report
from ..terminal import sanitize
from .common import CliError, echo_err
from .request import DEFAULT_HOST, ServeAt, host_option, port_option

FIRST_PORT, LAST_PORT = 8000, 8099  # tried in turn without --port (tlparse's range), then any free port
TEXT = "text/plain; charset=utf-8"  # shown by every browser, never run (nosniff)
CONTENT_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".json": "application/json; charset=utf-8",  # without a charset some browsers show its UTF-8 as Latin-1
    ".txt": TEXT,
    ".log": TEXT,
    ".jsonl": TEXT,  # raw.jsonl: read in the browser, not downloaded
    ".md": TEXT,  # text/markdown is downloaded by some browsers
    ".py": TEXT,  # vLLM's pattern dumps (vllm_patterns.*.py)
    ".svg": "image/svg+xml",
    ".png": "image/png",
    ".ico": "image/x-icon",
    ".gz": "application/gzip",
}
OTHER_TYPE = "application/octet-stream"  # an unknown extension whose start is not UTF-8 text
SNIFF = 4096  # bytes of a file of unknown extension read to tell text from binary
ANSWERED = ("GET", "HEAD")
LOOPBACK_NAMES = frozenset({"localhost"})  # not `*.localhost`: some resolvers ask DNS for them
# Host (or an absolute-form target's authority): a name, or a bracketed IPv6 address, and a port.
AUTHORITY = re.compile(r"(?:\[(?P<ipv6>[0-9A-Fa-f:.]+)\]|(?P<name>[A-Za-z0-9_.-]+))(?::[0-9]{0,5})?")
CHUNK = 1 << 16


@click.command("serve", context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("folder", metavar="[DIR]", default="tl_out", type=click.Path(path_type=Path))
@port_option
@host_option
def serve(folder: Path, port: int | None, host: str | None) -> None:
    """Serve the report in DIR over HTTP until Ctrl-C (default DIR: tl_out).

    It listens on 127.0.0.1, so only this machine can connect, unless --host says otherwise; the
    URL is printed. A folder that is not a report (no index.html, no report marker nor tlparse's
    files, or a .git in it) is refused, exit 2. Ctrl-C stops serving (exit 0); SIGTERM exits 143.
    """
    check_report_folder(folder)
    server = open_server(ServeAt(host or DEFAULT_HOST, port), folder)
    serve_until_stopped(server)


def check_report_folder(folder: Path) -> None:
    """`serve DIR` serves a report: CliError (exit 2) for a missing folder or one that is not a report."""
    if not folder.is_dir():
        raise CliError(f"{folder} is not a folder: give the folder a report was written to (-o)")
    if not (folder / "index.html").is_file() or not looks_like_report(folder):
        raise CliError(f"{folder} does not look like a tlparse report (no index.html, or it holds .git): nothing served")


# -- the server ---------------------------------------------------------------------------------------


class ReportServer(ThreadingHTTPServer):
    """Serves one report folder; one thread per connection, none of which keeps the process alive."""

    daemon_threads = True
    allow_reuse_port = False  # never share a port with another server: a busy port must be found busy
    folder: Path

    def __init__(self, address: tuple[str, int], family: socket.AddressFamily, folder: Path, host: str = ""):
        self.address_family = family
        self.folder = folder
        self.host_names = LOOPBACK_NAMES | {_host_name(host)} - {""}  # the --host name too: `--host devbox`
        super().__init__(address, Handler)

    def server_bind(self) -> None:
        # HTTPServer.server_bind asks DNS for the host's name (getfqdn): seconds where DNS is unreachable
        socketserver.TCPServer.server_bind(self)
        self.server_name, self.server_port = str(self.server_address[0]), int(self.server_address[1])

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that went away mid-answer (or any other failure of one request): nothing to print."""

    @property
    def url(self) -> str:
        host, port = str(self.server_address[0]), int(self.server_address[1])
        return f"http://[{host}]:{port}/" if ":" in host else f"http://{host}:{port}/"

    @property
    def loopback(self) -> bool:
        return _is_loopback(str(self.server_address[0]).split("%")[0])

    def answers_for(self, host: str) -> bool:
        """Whether a request for `host` (lowercased, no port, no final dot) is answered: on loopback, a
        loopback name or address only (a rebound DNS name is refused); elsewhere, any."""
        return not self.loopback or host in self.host_names or _is_loopback(host)


def _is_loopback(address: str) -> bool:
    """`address` is a loopback IP address (::ffff:127.0.0.1 included); False for a name."""
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return False
    mapped = ip.ipv4_mapped if isinstance(ip, ipaddress.IPv6Address) else None
    return ip.is_loopback or (mapped is not None and mapped.is_loopback)


def _host_name(host: str) -> str:
    """A host name as compared: lowercased, without the final dot of a fully qualified name."""
    host = host.lower()
    return host[:-1] if host.endswith(".") else host


class BadHost(ValueError):
    """A request whose host cannot be read: several Host headers, a malformed one, or none in HTTP/1.1."""


def absolute_form(target: str) -> tuple[str, str] | None:
    """An absolute-form request target (`http://host:port/path?query`, RFC 9112 3.2.2) as its authority
    and its origin-form path (`/path?query`); None for any other form. BadHost: a scheme not http(s)."""
    if target.startswith("/") or "://" not in target:
        return None
    scheme, _, rest = target.partition("://")
    if scheme.lower() not in ("http", "https"):
        raise BadHost(target)
    authority = re.split(r"[/?#]", rest, maxsplit=1)[0]
    path = rest[len(authority):]
    return authority, path if path.startswith("/") else "/" + path


def requested_host(target: str, host_headers: list[str], version: str) -> str | None:
    """The host a request was sent to, as `_host_name` gives it: an absolute-form target's (which
    overrides Host), else Host's. None: HTTP/1.0 (or 0.9) without Host, which no browser sends.
    BadHost for anything else that does not name one host."""
    absolute = absolute_form(target)
    if absolute is not None:
        authority = absolute[0]
    elif len(host_headers) == 1:
        authority = host_headers[0].strip(" \t")
    elif not host_headers and version in ("HTTP/1.0", "HTTP/0.9"):
        return None
    else:
        raise BadHost(f"{len(host_headers)} Host headers")
    match = AUTHORITY.fullmatch(authority)
    if match is None:
        raise BadHost(authority)
    if match["ipv6"] is not None:
        try:
            return str(ipaddress.IPv6Address(match["ipv6"]))
        except ValueError:
            raise BadHost(authority) from None
    return _host_name(match["name"])


class Handler(BaseHTTPRequestHandler):
    server: ReportServer
    server_version = "tlparse-py"
    protocol_version = "HTTP/1.1"
    timeout = 30  # an idle or stalled connection does not hold its thread for ever

    def do_GET(self) -> None:
        self._answer(body=True)

    def do_HEAD(self) -> None:
        self._answer(body=False)

    def parse_request(self) -> bool:
        """The request line and headers read, then what this server refuses whatever the path: a request
        for another host (DNS rebinding, 421) or without a readable one (400), and any method but GET
        and HEAD (405, also for methods http.server has no `do_` for, which it would answer 501)."""
        if not super().parse_request():
            return False
        try:
            host = requested_host(self.path, self.headers.get_all("Host") or [], self.request_version)
        except BadHost:
            self.send_error(HTTPStatus.BAD_REQUEST, "Bad request", "The request names no single, well-formed host.")
            return False
        if host is not None and not self.server.answers_for(host):
            self.send_error(HTTPStatus.MISDIRECTED_REQUEST, "Misdirected request",
                            "This server answers only requests for localhost or a loopback address.")
            return False
        absolute = absolute_form(self.path)
        if absolute is not None:
            self.path = absolute[1]  # its host is this server's: served as `GET /path` would be
        if self.command not in ANSWERED:
            self._not_allowed()
            return False
        if self.headers.get("Content-Length", "0").strip() not in ("", "0") or "Transfer-Encoding" in self.headers:
            self.close_connection = True  # a body is never read: it must not be taken for the next request
        return True

    def handle_expect_100(self) -> bool:
        """No `100 Continue`: a body is never read, so none is asked for; the answer comes straight away."""
        return True

    def _not_allowed(self) -> None:
        self.send_response(405)
        self.send_header("Allow", ", ".join(ANSWERED))
        self.send_header("Content-Length", "0")
        self.send_header("Connection", "close")  # a request body, unread, must not be taken for the next request
        self.close_connection = True
        self.end_headers()

    def version_string(self) -> str:
        return self.server_version  # no Python version in the Server header

    def end_headers(self) -> None:
        self.send_header("Cache-Control", "no-cache")  # a live report rewrites its pages: always ask again
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("Cross-Origin-Resource-Policy", "same-origin")  # no <script src> from another site's page
        super().end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        """No line per request (request lines are the client's text)."""

    def _answer(self, body: bool) -> None:
        target = resolve(self.server.folder, self.path)
        if isinstance(target, Redirect):
            self.send_response(301)
            self.send_header("Location", target.location)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        handle = _open_regular(target) if target is not None else None
        if target is None or handle is None:
            self.send_error(404, "Not found")
            return
        with handle:
            size = os.fstat(handle.fileno()).st_size
            self.send_response(200)
            self.send_header("Content-Type", content_type(target, handle))
            self.send_header("Content-Length", str(size))
            self.end_headers()
            if not body:
                return
            left = size
            while left > 0:  # no more than the length sent: a file growing meanwhile is cut where it was
                chunk = handle.read(min(CHUNK, left))
                if not chunk:
                    break
                self.wfile.write(chunk)
                left -= len(chunk)
            if left:  # it shrank: the length promised cannot be kept, so the connection is closed
                self.close_connection = True


def content_type(path: str, handle: Any) -> str:
    """The type `path` is sent as: its extension's, else text/plain when its start is UTF-8 text with no
    NUL (a plugin's record kind may write any extension), else application/octet-stream. `handle` is
    left at the file's start."""
    known = CONTENT_TYPES.get(os.path.splitext(path)[1].lower())
    if known is not None:
        return known
    start = handle.read(SNIFF)
    handle.seek(0)
    try:
        codecs.getincrementaldecoder("utf-8")().decode(start, final=False)  # a character cut at SNIFF is fine
    except UnicodeDecodeError:
        return OTHER_TYPE
    return OTHER_TYPE if b"\0" in start else TEXT


class Redirect:
    """A folder asked for without its trailing slash: its URL with one (relative links need it)."""

    def __init__(self, location: str):
        self.location = location


def resolve(folder: Path, request_path: str) -> str | Redirect | None:
    """The file inside `folder` that the request path names (resolved: no symlink left in it), a
    redirect to a folder's URL, or None (404). The folder is resolved now, not once: it may have been
    replaced since the last request."""
    path = request_path.split("?", 1)[0].split("#", 1)[0]
    if not path.startswith("/") or "\\" in path:
        return None
    try:
        decoded = unquote(path, errors="strict")
    except UnicodeDecodeError:
        return None
    if "\\" in decoded or "\0" in decoded:
        return None
    parts = [part for part in decoded.split("/") if part]
    if any(part.startswith(".") for part in parts):  # `.`, `..`, and hidden files (the report marker, .git)
        return None
    root = os.path.realpath(folder)
    if not os.path.isdir(root):
        return None
    found = _inside(root, os.path.join(root, *parts))
    if found is not None and os.path.isdir(found):
        if not decoded.endswith("/"):
            return Redirect("/" + "".join(quote(part) + "/" for part in parts))
        found = _inside(root, os.path.join(found, "index.html"))
    elif decoded.endswith("/"):
        return None  # a file asked for as a folder: its relative links would break
    return found if found is not None and os.path.isfile(found) else None


def _inside(root: str, path: str) -> str | None:
    """`path` resolved (every symlink followed), if it is `root` or lies inside it; else None."""
    resolved = os.path.realpath(path)
    if resolved == root or resolved.startswith(root.rstrip(os.sep) + os.sep):
        return resolved
    return None


def _open_regular(path: str) -> Any:
    """The file at `path` open for reading, if it is (still) a regular file: a symlink put in its place
    since it was resolved is not followed (O_NOFOLLOW), a FIFO does not block (O_NONBLOCK)."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            return None
        return os.fdopen(fd, "rb")
    except OSError:
        os.close(fd)
        return None


# -- binding and serving --------------------------------------------------------------------------------


def open_server(at: ServeAt, folder: Path) -> ReportServer:
    """A server for `folder`, bound (so the port is ours before any work starts) but not yet answering.
    CliError (exit 2): a --port in use, a --host that is not an address of this machine."""
    try:
        family, _, _, _, address = socket.getaddrinfo(at.host, None, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0]
    except (socket.gaierror, UnicodeError) as exc:
        raise CliError(f"--host {at.host}: not an address this machine can serve on ({exc})") from None
    host = str(address[0])
    ports = [at.port] if at.port is not None else [*range(FIRST_PORT, LAST_PORT + 1), 0]
    for port in ports:
        try:
            return ReportServer((host, port), family, folder, at.host)
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE and at.port is None:
                continue
            if exc.errno == errno.EADDRINUSE:
                raise CliError(f"--port {port}: the port is in use on {at.host}; choose another, or leave --port out for a free one") from None
            if exc.errno == errno.EADDRNOTAVAIL:
                raise CliError(f"--host {at.host}: not an address of this machine") from None
            raise CliError(f"cannot serve on {at.host} port {port}: {exc.strerror or exc}") from None
    raise CliError(f"cannot serve on {at.host}: no free port")  # pragma: no cover - port 0 is always offered


def start(server: ReportServer) -> threading.Thread:
    """Answer requests from now on, in a thread (the main thread stays free for signals)."""
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.2}, name="tlparse-py serve", daemon=True)
    thread.start()
    return thread


def announce(server: ReportServer, what: str = "") -> None:
    """The line that says where the report is served, and a warning when that is not only this machine."""
    folder = sanitize(str(server.folder))
    echo_err(f"Serving {folder} at {server.url} {what}(Ctrl-C to stop)")
    if not server.loopback:
        echo_err(f"warning: --host {sanitize(str(server.server_address[0]))}: anyone who can reach this machine at that address "
                 "can read the report; serve on 127.0.0.1 and use an SSH tunnel to keep it to yourself")


def serve_until_stopped(server: ReportServer, thread: threading.Thread | None = None) -> None:
    """Serve (in `thread`, when already started) until Ctrl-C (one line; the command then exits 0) or
    SIGTERM (one line, exit 143). Never a traceback."""
    previous = shutdown.install()
    try:
        if thread is None:
            thread = start(server)
            announce(server)
        while thread.is_alive():
            thread.join(0.5)
    except KeyboardInterrupt:
        _stop(server, thread)
        echo_err(f"stopped serving {sanitize(str(server.folder))} (Ctrl-C)")
        return
    except shutdown.Terminated:
        _stop(server, thread)
        echo_err(f"Terminated (SIGTERM): stopped serving {sanitize(str(server.folder))}")
        raise SystemExit(shutdown.EXIT_SIGTERM) from None
    finally:
        shutdown.restore(previous)
    raise CliError("the server stopped", 1)  # pragma: no cover - serve_forever returns only once shut down


def _stop(server: ReportServer, thread: threading.Thread | None) -> None:
    """Stop answering and close the port; a second Ctrl-C or SIGTERM meanwhile is ignored (no traceback)."""
    try:
        previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    except ValueError:  # not the main thread
        previous = None
    if thread is not None and thread.is_alive():
        server.shutdown()  # waits for serve_forever to return: only once it runs
    server.server_close()
    if previous is not None:
        signal.signal(signal.SIGINT, previous)
