"""Real redis-server processes for the CLI tests: free ports, temp dirs, killed by recorded pid.

The binary: $REDLOCK_TEST_REDIS_SERVER (as for the C++ fixtures), else redis-server on PATH.
`redlock-cli cluster` starts $REDLOCK_REDIS_SERVER instead. meson's Valkey runs set both to
valkey-server, and REDLOCK_TEST_SERVER_NAME=valkey: every server started here, and every node a
test checks with check_server(), must then report that server_name, so a run meant for Valkey
cannot quietly test Redis.
"""
import os
import random
import shutil
import signal
import socket
import subprocess
import tempfile
import time


SERVER = os.environ.get("REDLOCK_TEST_REDIS_SERVER") or "redis-server"
EXPECTED_SERVER = os.environ.get("REDLOCK_TEST_SERVER_NAME", "")
EXPECTED_VERSION = os.environ.get("REDLOCK_TEST_SERVER_VERSION", "")


def wait_until(pred, timeout=3.0):
    """True once pred() holds, polling every 20 ms; pred()'s last value after `timeout` s."""
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


def with_test_deadline(argv):
    """argv (program first) with `--node-timeout TEST_NODE_TIMEOUT` after the program, unless argv
    already sets a node timeout (the CLI refuses the flag twice)."""
    if any(a == "--node-timeout" or a.startswith("--node-timeout=") for a in argv):
        return list(argv)
    return [argv[0], "--node-timeout", TEST_NODE_TIMEOUT] + list(argv[1:])


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


def free_cluster_base(count):
    """A base port B with B..B+count-1 free and their cluster bus twins (+10000) free too, all
    below Linux's default ephemeral range (32768-60999), so that an outgoing connection cannot
    take one meanwhile: for `redlock-cli cluster up --topology cluster --base-port B`."""
    rng = random.Random()
    for _ in range(500):
        base = rng.randrange(20000, 22768 - count)
        if all(_bindable(base + i) and _bindable(base + i + 10000) for i in range(count)):
            return base
    raise RuntimeError("no %d consecutive free ports with free +10000 twins found" % count)


def free_base(count):
    """A base port B with B..B+count-1 free, for `redlock-cli cluster up` and `demo`: between
    free_cluster_base's bases (20000-22767) and their bus twins (30000-32767), so also below the
    ephemeral range. Picked from 20000-60000 before, a port could be taken by an outgoing
    connection between this check and the server's bind (a demo's node failed with "Address
    already in use" on port 59356 in a run of scripts/stress-runs.sh)."""
    rng = random.Random()
    for _ in range(500):
        base = rng.randrange(22768, 30000 - count)
        if all(_bindable(base + i) for i in range(count)):
            return base
    raise RuntimeError("no %d consecutive free ports found" % count)


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


def free_server_port():
    """A free port for one test server, below the ranges of free_cluster_base and free_base
    (10000-19999) and so below Linux's ephemeral range: an outgoing connection cannot take it
    between this check and the server's bind. Server re-picks if another test took it."""
    rng = random.Random()
    for _ in range(500):
        port = rng.randrange(10000, 20000)
        if _bindable(port):
            return port
    raise RuntimeError("no free port found in 10000-19999")


def read_bytes(path):
    with open(path, "rb") as f:
        return f.read()


def process_id(port):
    """INFO's process_id of the server answering on `port`, or None."""
    try:
        info = query(port, "INFO", "server")
    except OSError:
        return None
    if not isinstance(info, bytes):
        return None
    for line in info.splitlines():
        if line.startswith(b"process_id:"):
            return int(line.split(b":", 1)[1])
    return None


class Server:
    def __init__(self, extra=()):
        self.extra = list(extra)  # more redis-server arguments (e.g. --rename-command AUTH "")
        self.port = free_server_port()
        self.dir = tempfile.mkdtemp(prefix="redlock-cli-test-")
        self.proc = None
        self.start(may_repick=True)

    def start(self, may_repick=False):
        """Starts the server and returns once it, our process and no other, answers PING. If its
        port was taken meanwhile (another test's server, a client socket), a new server picks
        another port (`may_repick`); a restart retries its own port."""
        log = os.path.join(self.dir, "redis.log")
        deadline = time.time() + 10
        while True:
            if os.path.exists(log):
                os.remove(log)
            self.proc = subprocess.Popen(
                [SERVER, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
                 "--appendonly", "no", "--dir", self.dir, "--daemonize", "no",
                 "--logfile", log] + self.extra,
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            ready = False
            while not ready and self.proc.poll() is None and time.time() < deadline:
                try:
                    ready = (command(self.port, "PING").startswith(b"+PONG")
                             and process_id(self.port) == self.proc.pid)
                except OSError:
                    pass
                if not ready:
                    time.sleep(0.02)
            if ready:
                break
            self.kill()
            taken = os.path.exists(log) and b"Address already in use" in read_bytes(log)
            if not taken or time.time() >= deadline:
                self.close()
                raise RuntimeError("%s on %d did not start" % (SERVER, self.port))
            if may_repick:
                self.port = free_server_port()
            time.sleep(0.1)
        try:
            check_server(self.port)
        except BaseException:
            self.close()
            raise

    @property
    def address(self):
        return "127.0.0.1:%d" % self.port

    def kill(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()

    def stop(self):
        self.proc.send_signal(signal.SIGSTOP)

    def cont(self):
        self.proc.send_signal(signal.SIGCONT)

    def close(self):
        self.kill()
        shutil.rmtree(self.dir, ignore_errors=True)


class Cluster:
    def __init__(self, n):
        self.servers = [Server() for _ in range(n)]

    @property
    def nodes(self):
        return ",".join(s.address for s in self.servers)

    def count_with(self, key, value=None):
        n = 0
        for s in self.servers:
            if s.proc.poll() is not None:
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
