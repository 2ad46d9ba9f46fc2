#!/usr/bin/env python3
"""Tests of `redlock-cli cluster`: real redis-server processes started by the built binary.

The binary comes from $REDLOCK_CLI. Every test uses its own temporary --dir and free ports
(never 7001-7005), and tearDown runs `cluster down` so nothing outlives the test.
"""

import json
import os
import re
import shutil
import socket
import subprocess
import tempfile
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from redisfix import check_server, free_base, resp, server_name, wait_until, with_test_deadline  # noqa: E402

CLI = os.path.abspath(os.environ.get("REDLOCK_CLI", "redlock-cli"))
COUNT = 3


def alive(pid):
    """True if pid exists and has not exited (a zombie waiting for its reaper counts as gone)."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            stat = f.read()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2] not in "ZX"


def proc_state(pid):
    with open("/proc/%d/stat" % pid) as f:
        stat = f.read()
    return stat[stat.rindex(")") + 2]


class Resp:
    """Just enough of the Redis protocol to send a command and read one reply."""

    def __init__(self, port, timeout=1.0):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.file = self.sock.makefile("rb")

    def close(self):
        self.file.close()
        self.sock.close()

    def command(self, *args):
        self.sock.sendall(resp(*args))  # the Python tests' one encoder (redisfix.py)
        return self._read()

    def _read(self):
        line = self.file.readline()
        if not line:
            raise ConnectionError("connection closed")
        kind, rest = line[:1], line[1:-2]
        if kind == b"+":
            return rest.decode()
        if kind == b"-":
            raise RuntimeError(rest.decode())
        if kind == b":":
            return int(rest)
        if kind == b"$":
            n = int(rest)
            if n < 0:
                return None
            data = self.file.read(n + 2)[:-2]
            return data.decode()
        if kind == b"*":
            return [self._read() for _ in range(int(rest))]
        raise RuntimeError("unexpected reply %r" % line)


def redis(port, *args, timeout=1.0):
    r = Resp(port, timeout)
    try:
        return r.command(*args)
    finally:
        r.close()


def pings(port, timeout=0.5):
    try:
        return redis(port, "PING", timeout=timeout) == "PONG"
    except (OSError, ConnectionError):
        return False


def clean_env(**extra):
    """The environment without the client's REDLOCK_ settings, plus `extra`. REDLOCK_REDIS_SERVER
    stays: it picks the server `cluster up` starts (valkey-server in the Valkey runs)."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("REDLOCK_") or k == "REDLOCK_REDIS_SERVER"}
    env.update(extra)
    return env


class TopologyCase(unittest.TestCase):
    """A test of what `cluster up --topology ...` starts in a directory of its own (self.dir),
    which tearDown brings `down`, so that nothing outlives it; and the helpers such tests share
    (test_sentinel.py, test_cluster_vote.py)."""

    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="redlock-topology-test-")

    def tearDown(self):
        r = self.cluster("down")
        self.assertEqual(r.returncode, 0, r.stderr)
        shutil.rmtree(self.dir, ignore_errors=True)

    def run_cli(self, *args, env=None):
        return subprocess.run(with_test_deadline([CLI, *args]), capture_output=True, text=True, timeout=120,
                              env=env if env is not None else clean_env(), stdin=subprocess.DEVNULL)

    def cluster(self, *args, env=None):
        return self.run_cli("cluster", *args, "--dir", self.dir, env=env)

    def ok(self, r):
        self.assertEqual(r.returncode, 0, "stdout=%r stderr=%r" % (r.stdout, r.stderr))
        return r

    def status(self):
        return json.loads(self.ok(self.cluster("status", "--json")).stdout)["nodes"]

    def nodes_env(self):
        """What `eval "$(redlock-cli cluster env)"` would set."""
        env = clean_env()
        for line in self.ok(self.cluster("env")).stdout.splitlines():
            m = re.match(r"^export (\w+)='(.*)'$", line)
            if m:
                env[m.group(1)] = m.group(2)
        return env


class ClusterTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="redlock-cluster-test-")
        self.base = free_base(COUNT)
        self.ports = [self.base + i for i in range(COUNT)]

    def tearDown(self):
        r = self.cli("down")
        self.assertEqual(r.returncode, 0, r.stderr)
        shutil.rmtree(self.dir, ignore_errors=True)

    # -- helpers -------------------------------------------------------------------------------

    def cli(self, *args, env=None, with_dir=True):
        argv = [CLI, "cluster", *args] + (["--dir", self.dir] if with_dir else [])
        return subprocess.run(argv, capture_output=True, text=True, timeout=60, env=env,
                              stdin=subprocess.DEVNULL)

    def ok(self, *args):
        r = self.cli(*args)
        self.assertEqual(r.returncode, 0, "%s: stdout=%r stderr=%r" % (args, r.stdout, r.stderr))
        return r

    def up(self, *extra):
        # Only `up` gets --count/--base-port: the other commands must find them in the dir.
        r = self.ok("up", "--count", str(COUNT), "--base-port", str(self.base), *extra)
        if "--tls" not in extra:
            for port in self.ports:
                check_server(port)  # the server REDLOCK_TEST_SERVER_NAME names (Valkey runs)
        return r

    def status(self):
        r = self.cli("status", "--json")
        self.assertEqual(r.returncode, 0, r.stderr)
        return json.loads(r.stdout)["nodes"]

    def pid_files(self):
        return sorted(f for f in os.listdir(self.dir) if f.endswith(".pid"))

    # -- up / status -----------------------------------------------------------------------------

    def test_up_twice_is_idempotent(self):
        first = self.up()
        self.assertEqual(first.stdout.count("started"), COUNT, first.stdout)
        pids = [n["pid"] for n in self.status()]
        self.assertTrue(all(isinstance(p, int) and alive(p) for p in pids), pids)
        self.assertTrue(os.path.exists(os.path.join(self.dir, "cluster.conf")))

        second = self.ok("up")  # no flags: the saved settings
        self.assertEqual(second.stdout.count("already running"), COUNT, second.stdout)
        self.assertNotIn("started", second.stdout)
        self.assertEqual([n["pid"] for n in self.status()], pids)

    def test_status_text_and_json(self):
        self.up()
        text = self.ok("status").stdout.splitlines()
        self.assertEqual(text[0].split(),
                         ["NODE", "PORT", "PID", "STATE", "UPTIME", "KEYS", "PERSISTENCE"])
        self.assertEqual(len(text), 1 + COUNT, text)
        for i, line in enumerate(text[1:]):
            cols = line.split()
            self.assertEqual(cols[0], str(i + 1))
            self.assertEqual(cols[1], str(self.ports[i]))
            self.assertEqual(cols[3], "up")
            self.assertEqual(cols[6], "none")
        # Aligned: every row starts its columns at the same offsets as the header.
        self.assertEqual(len({l.index(l.split()[1]) for l in text}), 1, text)

        redis(self.ports[0], "SET", "a", "1")
        nodes = self.status()
        self.assertEqual([n["index"] for n in nodes], list(range(1, COUNT + 1)))
        self.assertEqual([n["port"] for n in nodes], self.ports)
        for n in nodes:
            self.assertEqual(n["state"], "up")
            self.assertIsInstance(n["pid"], int)
            self.assertIsInstance(n["uptime_s"], int)
            self.assertGreaterEqual(n["uptime_s"], 0)
            self.assertEqual(n["persistence"], "none")
        self.assertEqual([n["keys"] for n in nodes], [1] + [0] * (COUNT - 1))
        for p in self.ports:
            self.assertTrue(pings(p))

    def test_global_json_flag_before_subcommand(self):
        self.up()
        r = subprocess.run([CLI, "--json", "cluster", "status", "--dir", self.dir],
                           capture_output=True, text=True, timeout=30)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(len(json.loads(r.stdout)["nodes"]), COUNT)

    # -- one node --------------------------------------------------------------------------------

    def test_kill_then_start(self):
        self.up()
        old = self.status()[1]["pid"]
        r = self.ok("kill", "2")
        self.assertIn(str(old), r.stdout)
        self.assertTrue(wait_until(lambda: not alive(old)), "pid %d still alive" % old)
        nodes = self.status()
        self.assertEqual([n["state"] for n in nodes], ["up", "down", "up"])
        self.assertIsNone(nodes[1]["pid"])
        self.assertIsNone(nodes[1]["uptime_s"])
        self.assertFalse(pings(self.ports[1]))

        self.ok("start", "2")
        self.assertTrue(pings(self.ports[1]))
        node = self.status()[1]
        self.assertEqual(node["state"], "up")
        self.assertNotEqual(node["pid"], old)
        self.assertTrue(alive(node["pid"]))

    def test_stop_then_cont(self):
        self.up()
        pid = self.status()[0]["pid"]
        self.ok("stop", "1")
        self.assertEqual(proc_state(pid), "T")
        self.assertEqual([n["state"] for n in self.status()], ["paused", "up", "up"])
        self.assertFalse(pings(self.ports[0], timeout=0.3))
        self.assertIn("paused", self.ok("status").stdout.splitlines()[1])

        self.ok("cont", "1")
        self.assertEqual([n["state"] for n in self.status()], ["up", "up", "up"])
        self.assertTrue(pings(self.ports[0]))
        self.assertEqual(self.status()[0]["pid"], pid)

    def test_delayed_start(self):
        self.up()
        self.ok("kill", "3")
        t0 = time.monotonic()
        r = self.ok("start", "3", "--delay", "400ms")
        self.assertGreaterEqual(time.monotonic() - t0, 0.4)
        self.assertIn("delay", r.stdout)
        self.assertIn("400ms", r.stdout)
        self.assertTrue(pings(self.ports[2]))

    # -- down ------------------------------------------------------------------------------------

    def test_down_twice(self):
        self.up()
        pids = [n["pid"] for n in self.status()]
        r = self.ok("down")
        self.assertEqual(r.stdout.count("stopped"), COUNT, r.stdout)
        for p in pids:
            self.assertFalse(alive(p), "pid %d survived down" % p)
        self.assertEqual(self.pid_files(), [])
        for port in self.ports:
            self.assertFalse(pings(port))
        self.assertEqual([n["state"] for n in self.status()], ["down"] * COUNT)

        again = self.ok("down")
        self.assertIn("nothing running", again.stdout)

    def test_down_stops_a_paused_node(self):
        self.up()
        pids = [n["pid"] for n in self.status()]
        self.ok("stop", "2")
        self.ok("down")
        for p in pids:
            self.assertFalse(alive(p), "pid %d survived down" % p)
        self.assertEqual(self.pid_files(), [])

    def test_down_ignores_pid_file_of_a_foreign_process(self):
        # A stale pid file naming a live process that is not our redis: never signalled.
        victim = subprocess.Popen(["sleep", "30"])
        try:
            with open(os.path.join(self.dir, "node-1.pid"), "w") as f:
                f.write("%d\n" % victim.pid)
            r = self.ok("down")
            self.assertIsNone(victim.poll(), "down signalled a process it did not start")
            self.assertEqual(self.pid_files(), [], r.stdout)
            with open(os.path.join(self.dir, "node-1.pid"), "w") as f:
                f.write("%d\n" % victim.pid)
            r = self.cli("kill", "1", "--count", "1", "--base-port", str(self.base))
            self.assertEqual(r.returncode, 1)
            self.assertIsNone(victim.poll())
        finally:
            victim.kill()
            victim.wait()

    # -- conflicts and environment ---------------------------------------------------------------

    def test_port_taken_by_another_process(self):
        self.ok("up", "--count", "1", "--base-port", str(self.base))
        pid1 = self.status()[0]["pid"]
        blocker = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            blocker.bind(("127.0.0.1", self.ports[1]))
            blocker.listen(1)
            r = self.cli("up", "--count", str(COUNT))
            self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
            self.assertIn(str(self.ports[1]), r.stderr)
            self.assertEqual(r.stdout, "")
        finally:
            blocker.close()
        # Node 1 was left alone, and nothing else was started.
        self.assertTrue(pings(self.ports[0]))
        self.assertEqual(self.status()[0]["pid"], pid1)
        self.assertEqual(self.pid_files(), ["node-1.pid"])
        self.assertFalse(pings(self.ports[2]))

    def test_redis_server_missing_from_path(self):
        empty = tempfile.mkdtemp(prefix="redlock-empty-path-")
        try:
            env = dict(os.environ, PATH=empty)
            env.pop("REDLOCK_REDIS_SERVER", None)
            r = self.cli("up", "--count", str(COUNT), "--base-port", str(self.base), env=env)
            self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
            self.assertIn("redis-server", r.stderr)
            self.assertEqual(self.pid_files(), [])
        finally:
            shutil.rmtree(empty, ignore_errors=True)

    def test_redis_server_variable_picks_the_binary(self):
        # REDLOCK_REDIS_SERVER names the binary `up` and `start` run (valkey-server in the Valkey
        # runs): here a wrapper that leaves a mark, then runs the server under test as redis-server.
        real = os.environ.get("REDLOCK_REDIS_SERVER") or shutil.which("redis-server")
        wrapper = os.path.join(self.dir, "wrapped-server")
        mark = os.path.join(self.dir, "wrapper-ran")
        with open(wrapper, "w") as f:
            f.write('#!/bin/bash\necho "$$" >> %s\nexec -a redis-server %s "$@"\n' % (mark, real))
        os.chmod(wrapper, 0o755)
        env = dict(os.environ, REDLOCK_REDIS_SERVER=wrapper)
        r = self.cli("up", "--count", str(COUNT), "--base-port", str(self.base), env=env)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        with open(mark) as f:
            wrapped = sorted(int(p) for p in f.read().split())
        self.assertEqual(len(wrapped), COUNT)
        self.assertEqual(sorted(n["pid"] for n in self.status()), wrapped)
        self.ok("kill", "2")
        r = self.cli("start", "2", env=env)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        with open(mark) as f:
            self.assertEqual(len(f.read().split()), COUNT + 1)
        self.assertEqual(server_name(self.ports[1]), server_name(self.ports[0]))

    def test_redis_server_variable_not_executable(self):
        for value in (os.path.join(self.dir, "no-such-server"), self.dir):
            with self.subTest(value=value):
                env = dict(os.environ, REDLOCK_REDIS_SERVER=value)
                r = self.cli("up", "--count", str(COUNT), "--base-port", str(self.base), env=env)
                self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
                self.assertIn("REDLOCK_REDIS_SERVER=" + value, r.stderr)
                self.assertEqual(self.pid_files(), [])

    # -- persistence -----------------------------------------------------------------------------

    def test_aof_keeps_keys_across_kill_and_start(self):
        self.up("--persistence", "aof")
        self.assertEqual([n["persistence"] for n in self.status()], ["aof"] * COUNT)
        self.assertEqual(redis(self.ports[0], "SET", "survivor", "42"), "OK")
        self.ok("kill", "1")
        self.ok("start", "1")
        self.assertEqual(redis(self.ports[0], "GET", "survivor"), "42")
        self.assertEqual(redis(self.ports[0], "CONFIG", "GET", "appendfsync"), ["appendfsync", "always"])
        self.assertEqual(self.status()[0]["persistence"], "aof")

    def test_none_loses_keys_across_kill_and_start(self):
        self.up()
        redis(self.ports[0], "SET", "gone", "1")
        self.ok("kill", "1")
        self.ok("start", "1")
        self.assertIsNone(redis(self.ports[0], "GET", "gone"))
        self.assertEqual(redis(self.ports[0], "CONFIG", "GET", "appendonly"), ["appendonly", "no"])
        self.assertEqual(redis(self.ports[0], "CONFIG", "GET", "save"), ["save", ""])

    # -- bad input -------------------------------------------------------------------------------

    def test_bad_input(self):
        self.up()
        pids = [n["pid"] for n in self.status()]
        usage = [
            (("kill", "0"), "0"),
            (("kill", "99"), "99"),
            (("stop", "abc"), "abc"),
            (("start", "4"), "4"),
            (("up", "--count", "0"), "0"),
            (("up", "--count", "65"), "65"),
            (("up", "--base-port", "70000"), "70000"),
            (("up", "--base-port", "80"), "80"),
            (("status", "--persistence", "disk"), "disk"),
            (("start", "1", "--delay", "5parsecs"), "5parsecs"),
        ]
        for args, named in usage:
            with self.subTest(args=args):
                r = self.cli(*args)
                self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
                self.assertIn(named, r.stderr)
                self.assertTrue(r.stderr.startswith("redlock-cli"), r.stderr)
        with self.subTest(args="--dir /proc/nope"):
            r = subprocess.run([CLI, "cluster", "up", "--dir", "/proc/nope"],
                               capture_output=True, text=True, timeout=30)
            self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
            self.assertIn("/proc/nope", r.stderr)

        with self.subTest(args="start on a running node"):
            r = self.cli("start", "1")
            self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
            self.assertIn("already running", r.stderr)
            self.assertIn("node 1", r.stderr)

        self.ok("kill", "2")
        for verb in ("kill", "stop", "cont"):
            with self.subTest(args="%s on a dead node" % verb):
                r = self.cli(verb, "2")
                self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
                self.assertIn("not running", r.stderr)
                self.assertIn("node 2", r.stderr)

        # Nothing else was disturbed by any of that.
        nodes = self.status()
        self.assertEqual([n["state"] for n in nodes], ["up", "down", "up"])
        self.assertEqual([nodes[0]["pid"], nodes[2]["pid"]], [pids[0], pids[2]])

    def test_missing_or_unknown_command_is_named(self):
        # Like `git remote bogus`: the word that was not understood is in the message.
        for args, needle in ((("bogus",), "bogus"), (("up", "extra"), "extra"), ((), "up, down")):
            with self.subTest(args=args):
                r = self.cli(*args)
                self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
                self.assertIn(needle, r.stderr)
                self.assertEqual(r.stdout, "")
        self.assertEqual(self.pid_files(), [])

    def test_a_missing_dir_is_not_created_by_commands_that_start_nothing(self):
        # `down --dir /tmp/typo` and friends: nothing runs there, and nothing is left behind.
        missing = os.path.join(self.dir, "no", "such")
        for args, code, needle in ((("down",), 0, "nothing running"), (("kill", "1"), 1, "not running"),
                                   (("stop", "1"), 1, "not running"), (("cont", "1"), 1, "not running"),
                                   (("status",), 0, "down")):
            with self.subTest(args=args):
                r = subprocess.run([CLI, "cluster", *args, "--dir", missing], capture_output=True,
                                   text=True, timeout=30, stdin=subprocess.DEVNULL)
                self.assertEqual(r.returncode, code, r.stdout + r.stderr)
                self.assertIn(needle, r.stdout + r.stderr)
                self.assertFalse(os.path.exists(os.path.join(self.dir, "no")), args)

    def test_up_refuses_other_settings_while_running(self):
        self.up()
        r = self.cli("up", "--persistence", "aof")
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertIn("down", r.stderr)
        self.assertEqual([n["persistence"] for n in self.status()], ["none"] * COUNT)

    def test_help_on_every_level(self):
        for args in ((), ("up",), ("down",), ("status",), ("kill",), ("stop",), ("cont",),
                     ("start",)):
            with self.subTest(args=args):
                r = subprocess.run([CLI, "cluster", *args, "--help"],
                                   capture_output=True, text=True, timeout=30)
                self.assertEqual(r.returncode, 0, r.stderr)
                self.assertIn("Usage", r.stdout)
                self.assertIn("--dir", r.stdout)
        r = subprocess.run([CLI, "cluster", "start", "--help"], capture_output=True, text=True)
        self.assertIn("--delay", r.stdout)


if __name__ == "__main__":
    unittest.main(verbosity=2)
