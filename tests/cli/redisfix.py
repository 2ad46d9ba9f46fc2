"""Real redis-server processes for the CLI tests: free ports, temp dirs, killed by recorded pid."""
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


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


def get(port, key):
    r = command(port, "GET", key)
    if r.startswith(b"$-1"):
        return None
    header, _, rest = r.partition(b"\r\n")
    return rest[: int(header[1:])].decode("latin-1")


class Server:
    def __init__(self):
        self.port = free_port()
        self.dir = tempfile.mkdtemp(prefix="redlock-cli-test-")
        self.proc = None
        self.start()

    def start(self):
        self.proc = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--dir", self.dir, "--daemonize", "no",
             "--logfile", os.path.join(self.dir, "redis.log")],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.time() + 5
        while time.time() < deadline:
            try:
                if command(self.port, "PING").startswith(b"+PONG"):
                    return
            except OSError:
                time.sleep(0.02)
        raise RuntimeError("redis-server on %d did not start" % self.port)

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

    def close(self):
        for s in self.servers:
            s.close()
