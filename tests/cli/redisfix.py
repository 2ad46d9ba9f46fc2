"""Real redis-server processes for the Python tests, started by the tests' one launcher.

Server starts its server through tests/support/node-launcher ($REDLOCK_NODE_LAUNCHER), the C++
fixture as a program: free port, temp dir, PING from our own process, the binary from
$REDLOCK_TEST_REDIS_SERVER (as for the C++ fixtures), else redis-server on PATH.
`redlock-cli cluster` starts $REDLOCK_REDIS_SERVER instead. meson's Valkey runs set both to
valkey-server, and REDLOCK_TEST_SERVER_NAME=valkey: every server the launcher starts, and every
node a test checks with check_server(), must then report that server_name, so a run meant for
Valkey cannot quietly test Redis.
"""
import fcntl
import os
import random
import socket
import subprocess
import tempfile
import time


SERVER = os.environ.get("REDLOCK_TEST_REDIS_SERVER") or "redis-server"
EXPECTED_SERVER = os.environ.get("REDLOCK_TEST_SERVER_NAME", "")
EXPECTED_VERSION = os.environ.get("REDLOCK_TEST_SERVER_VERSION", "")


def wait_until(pred, timeout=10.0):
    """True once pred() holds, polling every 20 ms; pred()'s last value after `timeout` s. The
    default is generous (a loaded machine, scripts/test.sh --stress): a caller that expects False
    (something must not happen) passes its own, shorter timeout."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return True
        time.sleep(0.02)
    return pred()


# The CLI's own node deadline is 50 ms (the Redis documentation's figure). With a busy core, a
# disk writer and the sanitizer builds beside them (scripts/test.sh --stress), a server sometimes
# answers later than that, and an operation a test needs to succeed would fail by chance. Tests
# run the CLI with this deadline; a test about deadlines passes its own --node-timeout.
TEST_NODE_TIMEOUT = "250ms"
# Likewise the connect deadline (the CLI's 250 ms): under --stress a whole CLI call once failed
# with "5 down: connect timeout after 250 ms" against five live local servers.
TEST_CONNECT_TIMEOUT = "2s"


def with_test_deadline(argv):
    """argv (program first) with `--node-timeout TEST_NODE_TIMEOUT` and `--connect-timeout
    TEST_CONNECT_TIMEOUT` after the program, each unless argv already sets it (the CLI refuses a
    flag twice)."""
    def sets(flag):
        return any(a == flag or a.startswith(flag + "=") for a in argv)
    extra = []
    if not sets("--node-timeout"):
        extra += ["--node-timeout", TEST_NODE_TIMEOUT]
    if not sets("--connect-timeout"):
        extra += ["--connect-timeout", TEST_CONNECT_TIMEOUT]
    return [argv[0]] + extra + list(argv[1:])


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _bindable(port):
    with socket.socket() as s:  # no SO_REUSEADDR: leftovers in TIME_WAIT count as taken
        try:
            s.bind(("127.0.0.1", port))
            return True
        except OSError:
            return False


# Ports handed out by free_base() and free_cluster_base() stay reserved for the life of this
# process: an exclusive flock on a file per port in a directory every test process shares. The CLI
# tests run side by side, and `redlock-cli cluster up --base-port B` binds its ports a while after
# the test picked B; without the reservation two tests could pick overlapping ranges in that
# window. The C++ fixtures pick from other ranges (tests/support/redis_fixture.hpp lists them all),
# so only these two functions need to agree.
_RESERVATIONS = os.path.join(tempfile.gettempdir(), "redlock-test-ports")
_reserved = []  # open lock files, closed (and so released) when the process ends
_handed_out = set()  # never the same port twice in one process, even after its servers stopped


def _reserve(ports):
    """Takes every port of `ports` for this process, or none of them (False)."""
    os.makedirs(_RESERVATIONS, mode=0o1777, exist_ok=True)
    taken = []
    try:
        for port in ports:
            fd = os.open(os.path.join(_RESERVATIONS, str(port)), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o666)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                os.close(fd)
                raise
            taken.append(fd)
    except OSError:
        for fd in taken:
            os.close(fd)
        return False
    _reserved.extend(taken)
    return True


def _pick(count, low, high, twin_offset=None):
    rng = random.Random()
    for _ in range(500):
        base = rng.randrange(low, high - count + 1)
        ports = list(range(base, base + count))
        if twin_offset:
            ports += [p + twin_offset for p in ports]
        if any(p in _handed_out for p in ports) or not _reserve(ports):
            continue
        if all(_bindable(p) for p in ports):
            _handed_out.update(ports)
            return base
    return None


def free_cluster_base(count):
    """A base port B with B..B+count-1 free and their cluster bus twins (+10000) free too, all
    below Linux's ephemeral range (32768-60999), so that an outgoing connection cannot
    take one meanwhile: for `redlock-cli cluster up --topology cluster --base-port B`. Reserved
    for this process (above)."""
    base = _pick(count, 20000, 22767, twin_offset=10000)
    if base is None:
        raise RuntimeError("no %d consecutive free ports with free +10000 twins found" % count)
    return base


def free_base(count):
    """A base port B with B..B+count-1 free, for `redlock-cli cluster up` and `demo`: between
    free_cluster_base's bases (20000-22767) and the C++ fixtures' bus twins (28000-29999), so also
    below the ephemeral range. Picked from 20000-60000 before, a port could be taken by an outgoing
    connection between this check and the server's bind (a demo's node failed with "Address
    already in use" on port 59356 in a run of scripts/stress-runs.sh). Reserved for this process
    (above)."""
    base = _pick(count, 22768, 27999)
    if base is None:
        raise RuntimeError("no %d consecutive free ports found" % count)
    return base


def resp(*args):
    out = b"*%d\r\n" % len(args)
    for a in args:
        if isinstance(a, str):
            a = a.encode()
        out += b"$%d\r\n%s\r\n" % (len(a), a)
    return out


def command(port, *args, timeout=2.0):
    """Sends one command, returns the raw first reply line(s) decoded loosely."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(resp(*args))
        data = b""
        while not data.endswith(b"\r\n") or (data.startswith(b"$") and data.count(b"\r\n") < 2 and not data.startswith(b"$-1")):
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
        return data


def query(port, *args, timeout=2.0, password=None):
    """Sends one command and returns its whole reply parsed: bytes, int, None, a list, or an
    Exception for an error reply (returned, not raised). With `password`, AUTH first (an error
    reply to it is returned)."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall((resp("AUTH", password) if password is not None else b"") + resp(*args))
        buf = s.makefile("rb")

        def read():
            line = buf.readline()
            if not line.endswith(b"\r\n"):
                raise ConnectionError("connection closed inside a reply")
            kind, body = line[:1], line[1:-2]
            if kind == b"+":
                return body
            if kind == b"-":
                return Exception(body.decode("latin-1"))
            if kind == b":":
                return int(body)
            if kind == b"$":
                n = int(body)
                return None if n < 0 else buf.read(n + 2)[:n]
            if kind == b"*":
                n = int(body)
                return None if n < 0 else [read() for _ in range(n)]
            raise ValueError("unexpected reply line %r" % line)

        if password is not None:
            auth = read()
            if isinstance(auth, Exception):
                return auth
        return read()


def get(port, key):
    r = command(port, "GET", key)
    if r.startswith(b"$-1"):
        return None
    header, _, rest = r.partition(b"\r\n")
    return rest[: int(header[1:])].decode("latin-1")


def server_identity(port):
    """(server_name, version) of the server on port: INFO server's server_name (Redis has none:
    "redis") and its version (valkey_version on Valkey, which reports redis_version 7.2.4 for
    compatibility; redis_version elsewhere)."""
    with socket.create_connection(("127.0.0.1", port), timeout=2.0) as s:
        s.sendall(resp("INFO", "server"))
        data = b""
        while b"\r\n" not in data or len(data) < data.index(b"\r\n") + 2 + int(data[1:data.index(b"\r\n")]):
            chunk = s.recv(65536)
            if not chunk:
                raise ConnectionError("INFO server: connection closed after %r" % data[:80])
            data += chunk
    if not data.startswith(b"$"):
        raise RuntimeError("INFO server: unexpected reply %r" % data[:80])
    fields = dict(line.split(":", 1) for line in data.decode("latin-1").split("\r\n") if ":" in line)
    return (fields.get("server_name", "redis"),
            fields.get("valkey_version") or fields.get("redis_version", ""))


def server_name(port):
    return server_identity(port)[0]


def check_server(port):
    """Raises AssertionError when REDLOCK_TEST_SERVER_NAME is set and the node on port is another
    server than the one it names, or (REDLOCK_TEST_SERVER_VERSION, set by
    tests/servers/with-server.sh) another version."""
    if EXPECTED_SERVER:
        name, version = server_identity(port)
        if name != EXPECTED_SERVER:
            raise AssertionError("the node on port %d is %s, not %s (REDLOCK_TEST_SERVER_NAME)"
                                 % (port, name, EXPECTED_SERVER))
        if EXPECTED_VERSION and not version.startswith(EXPECTED_VERSION):
            raise AssertionError("the node on port %d is %s %s, not %s (REDLOCK_TEST_SERVER_VERSION)"
                                 % (port, name, version, EXPECTED_VERSION))


def launcher():
    """The one server launcher of the tests (tests/support/node_launcher.cpp: the C++ fixture as a
    program), which meson names in $REDLOCK_NODE_LAUNCHER."""
    path = os.environ.get("REDLOCK_NODE_LAUNCHER")
    if not path:
        raise RuntimeError("REDLOCK_NODE_LAUNCHER is not set: run the tests through meson test, or "
                           "set it to build/tests/support/node-launcher")
    return path


class Server:
    """One server started by the launcher: on a free port (another one if it was taken meanwhile),
    in a temp dir, ready once our own process answers PING, and checked to be the server the run
    names (REDLOCK_TEST_SERVER_NAME, REDLOCK_TEST_SERVER_VERSION). Faults (kill, stop, cont,
    start) are commands to the launcher, which signals the server it started; this process never
    signals a server. The launcher kills the server and removes its dir on close(), and on its own
    when this process ends (its stdin closes).

    `extra`: more server arguments (e.g. --rename-command AUTH ""). `tls`: (cert, key, ca) files
    for a TLS listener on a free port beside the plaintext one (tls_port), clients not asked for
    a certificate; with `tls_only` the TLS listener alone (port is then the TLS port)."""

    def __init__(self, extra=(), tls=None, tls_only=False):
        argv = [launcher()]
        if tls:
            cert, key, ca = tls
            argv += ["--tls-cert", cert, "--tls-key", key, "--tls-ca", ca, "--tls-auth-clients", "no"]
            if tls_only:
                argv.append("--tls-only")
        argv += ["--"] + list(extra)
        self.launcher = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                         text=True, bufsize=1)
        line = self.launcher.stdout.readline().strip()
        fields = line.split(" ", 3)
        if len(fields) != 4 or not all(f.isdigit() for f in fields[:3]):
            self.close()
            raise RuntimeError("%s did not start: %s" % (SERVER, line or "the launcher ended"))
        self.port, self.pid, self.tls_port = (int(f) for f in fields[:3])
        self.dir = fields[3]

    def _ask(self, command):
        """Sends one command to the launcher and returns its answer (RuntimeError on `error`)."""
        self.launcher.stdin.write(command + "\n")
        self.launcher.stdin.flush()
        answer = self.launcher.stdout.readline().strip()
        if not answer or answer.startswith("error"):
            raise RuntimeError("launcher %s on port %d: %s" % (command, self.port, answer or "ended"))
        return answer

    @property
    def address(self):
        return "127.0.0.1:%d" % self.port

    def running(self):
        """True while the server runs (stopped or not); False once killed or dead."""
        return self._ask("running") == "yes"

    def start(self):
        """Starts a killed server again on its port and waits until it answers."""
        self.pid = int(self._ask("start").split()[1])

    def kill(self):
        """SIGKILL, by the launcher, which reaps the server. Nothing to do once closed."""
        if self.launcher.poll() is None and not self.launcher.stdin.closed:
            self._ask("kill")

    def stop(self):
        """SIGSTOP: returns once the server is stopped."""
        self._ask("stop")

    def cont(self):
        self._ask("cont")

    def close(self):
        """Stops the server, waits for it and removes its dir (the launcher does all three)."""
        if self.launcher.poll() is None:
            try:
                self.launcher.stdin.write("quit\n")
                self.launcher.stdin.flush()
            except OSError:
                pass
        try:
            self.launcher.stdin.close()
        except OSError:
            pass
        self.launcher.wait()
        self.launcher.stdout.close()


class Cluster:
    def __init__(self, n):
        self.servers = [Server() for _ in range(n)]

    @property
    def nodes(self):
        return ",".join(s.address for s in self.servers)

    def count_with(self, key, value=None):
        n = 0
        for s in self.servers:
            if not s.running():
                continue
            v = get(s.port, key)
            if v is not None and (value is None or v == value):
                n += 1
        return n

    def settled_count(self, n, key, value=None, timeout=10.0):
        """count_with(key, value) once it equals n, or its value after `timeout` s. The CLI exits
        at the quorum decision: the last node's SET, rollback or delete may land a moment later,
        so a check of every node waits for that state (well inside the 30 s default ttl)."""
        wait_until(lambda: self.count_with(key, value) == n, timeout)
        return self.count_with(key, value)

    def close(self):
        for s in self.servers:
            s.close()
