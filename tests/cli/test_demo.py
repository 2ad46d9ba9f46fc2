#!/usr/bin/env python3
"""`redlock-cli demo`: its exit status and verdict, plain output into a pipe, colour on a terminal.

Every run uses its own temporary --dir and free ports (never 7001-7005); nodes a test starts
itself are stopped with `cluster down` in tearDown.
"""

import json
import os
import pty
import shutil
import subprocess
import sys
import tempfile
import threading
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from redisfix import free_base  # noqa: E402

CLI = os.path.abspath(os.environ.get("REDLOCK_CLI", "redlock-cli"))
ANSI = b"\x1b["


def clean_env(**extra):
    # REDLOCK_REDIS_SERVER stays: it picks the server `cluster up` starts (valkey-server in the
    # Valkey runs), not a client setting.
    env = {k: v for k, v in os.environ.items()
           if (not k.startswith(("REDLOCK_", "FAILOVER_")) or k == "REDLOCK_REDIS_SERVER") and k != "NO_COLOR"}
    env.update(extra)
    return env


def run_on_tty(args, env, timeout=120):
    """Runs args with stdout on a pseudo-terminal; returns (exit status, bytes written)."""
    master, slave = pty.openpty()
    proc = subprocess.Popen(args, stdout=slave, stderr=slave, stdin=subprocess.DEVNULL, env=env)
    os.close(slave)
    chunks = []

    def drain():
        while True:
            try:
                data = os.read(master, 65536)
            except OSError:  # EIO once the child's side is closed
                return
            if not data:
                return
            chunks.append(data)

    reader = threading.Thread(target=drain)
    reader.start()
    try:
        rc = proc.wait(timeout=timeout)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        reader.join(5)
        os.close(master)
    return rc, b"".join(chunks)


class Demo(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="redlock-demo-test-")

    def tearDown(self):
        subprocess.run([CLI, "cluster", "down", "--dir", self.dir], capture_output=True, timeout=30)
        shutil.rmtree(self.dir, ignore_errors=True)

    def cluster_states(self):
        r = subprocess.run([CLI, "cluster", "status", "--dir", self.dir, "--json"],
                           capture_output=True, timeout=30, env=clean_env())
        self.assertEqual(r.returncode, 0, r.stderr)
        return [n["state"] for n in json.loads(r.stdout)["nodes"]]

    def test_passes_with_a_verdict_and_plain_output_when_piped(self):
        base = free_base(5)
        r = subprocess.run([CLI, "demo", "--base-port", str(base), "--dir", self.dir],
                           capture_output=True, timeout=120, env=clean_env(TERM="xterm"))
        out = r.stdout.decode()
        self.assertEqual(r.returncode, 0, out[-3000:] + r.stderr.decode())
        lines = out.rstrip("\n").splitlines()
        self.assertRegex(lines[-1], r"^verdict: PASS: all \d+ checks passed")
        self.assertNotIn("[FAIL]", out)
        for step in ("1. The nodes", "2. Take a lock", "3. Kill masters", "4a.", "4b.", "4c.", "5. Restore"):
            self.assertIn(step, out)
        self.assertNotIn(ANSI, r.stdout + r.stderr)
        # It started the nodes, so it stopped them.
        self.assertEqual(self.cluster_states(), ["down"] * 5)

    def test_over_tls_on_the_nodes_of_cluster_up_tls(self):
        base = free_base(3)
        r = subprocess.run([CLI, "cluster", "up", "--tls", "--count", "3", "--base-port", str(base),
                            "--dir", self.dir], capture_output=True, timeout=60, env=clean_env())
        self.assertEqual(r.returncode, 0, r.stderr.decode())
        # TLS-only nodes: a demo that talked plaintext anywhere could not pass. No --tls: the
        # cluster directory says it.
        r = subprocess.run([CLI, "demo", "--dir", self.dir], capture_output=True, timeout=120, env=clean_env())
        out = r.stdout.decode()
        self.assertEqual(r.returncode, 0, out[-3000:] + r.stderr.decode())
        self.assertIn("3 independent Redis masters on 127.0.0.1:%d-%d, TLS only" % (base, base + 2),
                      out.splitlines()[0])
        self.assertRegex(out.rstrip("\n").splitlines()[-1], r"^verdict: PASS: all \d+ checks passed")
        self.assertEqual(self.cluster_states(), ["up"] * 3)

    def test_uses_running_nodes_leaves_them_running_and_colours_a_terminal(self):
        base = free_base(3)
        up = subprocess.run([CLI, "cluster", "up", "--count", "3", "--base-port", str(base), "--dir", self.dir],
                            capture_output=True, timeout=60)
        self.assertEqual(up.returncode, 0, up.stderr)
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        from redisfix import check_server
        for port in range(base, base + 3):
            check_server(port)  # the server REDLOCK_TEST_SERVER_NAME names (Valkey runs)
        # No --count/--base-port: the demo takes what `cluster up` saved in the directory.
        rc, out = run_on_tty([CLI, "demo", "--dir", self.dir], clean_env(TERM="xterm"))
        self.assertEqual(rc, 0, out.decode(errors="replace")[-3000:])
        self.assertIn(ANSI, out)
        self.assertIn(b"verdict: PASS", out)
        self.assertIn(b"already running", out)
        self.assertEqual(self.cluster_states(), ["up"] * 3)

    def test_sentinel_chapter(self):
        # --topology sentinel: the chapter where a majority of Sentinel votes fails over while a
        # lock is held. Its checks fail if the promoted replicas' votes count before the
        # quarantine ends (B or G would get the lock, or B before A's lock expired), or if
        # replicated votes do not keep the key across a failover.
        base = free_base(9)
        r = subprocess.run([CLI, "demo", "--topology", "sentinel", "--count", "3", "--base-port", str(base),
                            "--dir", self.dir], capture_output=True, timeout=120, env=clean_env())
        out = r.stdout.decode()
        self.assertEqual(r.returncode, 0, out[-4000:] + r.stderr.decode())
        lines = out.rstrip("\n").splitlines()
        self.assertIn("3 Sentinel-managed masters (m1..m3, one replica each) and 3 sentinels", lines[0])
        self.assertRegex(lines[-1], r"^verdict: PASS: all \d+ checks passed")
        for step in ("2. A lock through Sentinel", "3a. Without the guard", "3b. With the guard",
                     "4. Replicated votes", "5. Restore", "every promoted replica has R's key"):
            self.assertIn(step, out)
        self.assertIn("excluded", out)
        self.assertIn("promoted", out)
        # It started the 9 processes, so it stopped them.
        self.assertEqual(self.cluster_states(), ["down"] * 9)
        self.assertFalse(any(f.endswith(".pid") for f in os.listdir(self.dir)))

    def test_cluster_chapter(self):
        # --topology cluster: the chapter where the master of the key's slot fails in a majority of
        # Redis Cluster votes while a lock is held. Its checks fail if the vote does not follow
        # the slot map (status names the wrong master, or the failover is not seen), if a
        # long-lived client counts a promoted replica's vote before the quarantine ends (G gets
        # the lock, or before A's expired), if the unguarded client is not let in (nothing was
        # demonstrated), or if replicated votes do not keep the key across a failover.
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        from redisfix import free_cluster_base
        base = free_cluster_base(18)
        r = subprocess.run([CLI, "demo", "--topology", "cluster", "--count", "3", "--base-port", str(base),
                            "--dir", self.dir], capture_output=True, timeout=180, env=clean_env())
        out = r.stdout.decode()
        self.assertEqual(r.returncode, 0, out[-5000:] + r.stderr.decode())
        lines = out.rstrip("\n").splitlines()
        self.assertIn("3 Redis Clusters (c1..c3, each 3 masters with 1 replica)", lines[0])
        self.assertRegex(lines[-1], r"^verdict: PASS: all \d+ checks passed")
        self.assertNotIn("[FAIL]", out)
        for step in ("2. A lock over Redis Cluster votes", "each vote's key is on the master that serves its slot",
                     "3a. Without the guard", "!! two clients hold demo:cluster at once",
                     "3b. With the guard", "G is refused while A's lock is valid",
                     "cannot tell", "4. Replicated votes", "every promoted replica has R's key",
                     "5. Restore"):
            self.assertIn(step, out)
        # G's refusal names the reason: the vote's master was a replica before the failover.
        self.assertRegex(out, r"excluded .*restart guard: master 127\.0\.0\.1:\d+ was (a replica|promoted from replica)")
        # It started the 18 processes, so it stopped them.
        self.assertEqual(self.cluster_states(), ["down"] * 18)
        self.assertFalse(any(f.endswith(".pid") for f in os.listdir(self.dir)))

    def node_command(self, port, *args):
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        from redisfix import command
        return command(port, *args)

    def test_refuses_running_nodes_that_hold_data_it_would_lose(self):
        # A local cluster already in use (persistence none): node 1 holds a key someone else
        # wrote, a held lock say. The demo kills and restarts nodes 1..Q empty, so it must refuse
        # before changing anything, say why, exit non-zero, and leave the key where it was.
        base = free_base(3)
        up = subprocess.run([CLI, "cluster", "up", "--count", "3", "--base-port", str(base), "--dir", self.dir],
                            capture_output=True, timeout=60)
        self.assertEqual(up.returncode, 0, up.stderr)
        self.assertTrue(self.node_command(base, "SET", "someone:lock", "their-token", "PX", "600000")
                        .startswith(b"+OK"))
        self.assertTrue(self.node_command(base + 2, "SET", "kept", "v").startswith(b"+OK"))
        pids = self.pids()
        r = subprocess.run([CLI, "demo", "--dir", self.dir], capture_output=True, timeout=120, env=clean_env())
        out = r.stdout.decode()
        self.assertEqual(r.returncode, 1, out[-3000:] + r.stderr.decode())
        self.assertIn(b"refus", r.stderr)
        self.assertIn(b"node 1", r.stderr)
        self.assertIn("127.0.0.1:%d" % base, r.stderr.decode())
        self.assertRegex(out.rstrip("\n").splitlines()[-1], r"^verdict: REFUSED")
        self.assertNotIn("kill -9", out)
        self.assertEqual(self.node_command(base, "GET", "someone:lock"), b"$11\r\ntheir-token\r\n")
        self.assertEqual(self.node_command(base + 2, "GET", "kept"), b"$1\r\nv\r\n")
        self.assertEqual(self.cluster_states(), ["up"] * 3)
        self.assertEqual(self.pids(), pids)  # not restarted

    def test_durable_running_nodes_keep_their_keys(self):
        # With appendonly yes + appendfsync always a killed node comes back with its keys: the
        # demo may run, and its last checks say (and check) that every key is still there.
        base = free_base(3)
        up = subprocess.run([CLI, "cluster", "up", "--count", "3", "--base-port", str(base), "--dir", self.dir,
                             "--persistence", "aof"], capture_output=True, timeout=60)
        self.assertEqual(up.returncode, 0, up.stderr)
        for i in range(3):
            self.assertTrue(self.node_command(base + i, "SET", "user:key", "v%d" % i).startswith(b"+OK"))
        r = subprocess.run([CLI, "demo", "--dir", self.dir], capture_output=True, timeout=120, env=clean_env())
        out = r.stdout.decode()
        self.assertEqual(r.returncode, 0, out[-3000:] + r.stderr.decode())
        self.assertIn("still hold the 3 keys", out)
        for i in range(3):
            self.assertEqual(self.node_command(base + i, "GET", "user:key"), b"$2\r\nv%d\r\n" % i)

    def pids(self):
        r = subprocess.run([CLI, "cluster", "status", "--dir", self.dir, "--json"],
                           capture_output=True, timeout=30, env=clean_env())
        return [n["pid"] for n in json.loads(r.stdout)["nodes"]]

    def test_no_color_on_a_terminal(self):
        base = free_base(1)
        rc, out = run_on_tty([CLI, "demo", "--count", "1", "--base-port", str(base), "--dir", self.dir],
                             clean_env(TERM="xterm", NO_COLOR="1"))
        self.assertEqual(rc, 0, out.decode(errors="replace")[-3000:])
        self.assertIn(b"verdict: PASS", out)
        self.assertNotIn(ANSI, out)

    def test_closed_stdout_still_restores_the_nodes(self):
        # `redlock-cli demo | head`: the reader goes away once the demo has started masters. The
        # demo must not die of SIGPIPE with them left running (or others left killed).
        base = free_base(3)
        proc = subprocess.Popen([CLI, "demo", "--count", "3", "--base-port", str(base), "--dir", self.dir],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=clean_env())
        try:
            seen = b""
            while b"masters are up" not in seen:  # step 1 has started them
                line = proc.stdout.readline()
                self.assertTrue(line, seen.decode())
                seen += line
            proc.stdout.close()
            err = proc.stderr.read()
            rc = proc.wait(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        self.assertEqual(rc, 141, err)
        self.assertIn(b"stdout was closed", err)
        self.assertEqual(self.cluster_states(), ["down"] * 3)
        self.assertFalse(any(f.endswith(".pid") for f in os.listdir(self.dir)))

    def test_usage_errors_exit_2_and_start_nothing(self):
        for args, needle in ((["--count", "0"], b"count"), (["--base-port", "http"], b"http"),
                             (["--count", "3", "--base-port", "65534"], b"65535"), (["--bogus"], b"--bogus")):
            r = subprocess.run([CLI, "demo", "--dir", self.dir] + args, capture_output=True, timeout=30,
                               env=clean_env())
            self.assertEqual(r.returncode, 2, (args, r.stdout, r.stderr))
            self.assertIn(needle, r.stderr, args)
        self.assertFalse(any(f.endswith(".pid") for f in os.listdir(self.dir)))

    def test_help(self):
        r = subprocess.run([CLI, "demo", "--help"], capture_output=True, timeout=30)
        self.assertEqual(r.returncode, 0)
        self.assertIn(b"--base-port", r.stdout)

    def test_demo_sh_help_does_not_run_the_setup(self):
        # `scripts/demo.sh -h` must answer at once, not install packages and build first. A copy
        # of the script next to a setup.sh that only leaves a mark shows whether set-up ran.
        scripts = os.path.join(self.dir, "scripts")
        os.mkdir(scripts)
        shutil.copy(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts", "demo.sh"),
                    scripts)
        mark = os.path.join(self.dir, "setup-ran")
        with open(os.path.join(scripts, "setup.sh"), "w") as f:
            f.write("#!/bin/sh\ntouch '%s'\nexit 1\n" % mark)
        os.chmod(os.path.join(scripts, "setup.sh"), 0o755)
        for flag in ("-h", "--help"):
            r = subprocess.run([os.path.join(scripts, "demo.sh"), flag], capture_output=True, timeout=30,
                               env=clean_env())
            self.assertEqual(r.returncode, 0, (flag, r.stdout, r.stderr))
            self.assertIn(b"Usage: scripts/demo.sh", r.stdout)
            self.assertIn(b"--base-port", r.stdout)
            self.assertFalse(os.path.exists(mark), flag)


if __name__ == "__main__":
    unittest.main(verbosity=2)
