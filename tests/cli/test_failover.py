#!/usr/bin/env python3
"""scripts/failover-*.sh against a local cluster on free ports in a temporary directory.

The scripts assert what redlock-cli reports while masters are killed, paused and restarted; here
each must pass, and must put every master back (up, not paused) whatever happened.
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from redisfix import TEST_NODE_TIMEOUT, check_server  # noqa: E402
from test_demo import CLI, clean_env, free_base  # noqa: E402

SCRIPTS = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts"))
COUNT = 5
# The scripts' redlock-cli calls otherwise keep the CLI's 50 ms node deadline: under load (scripts/
# test.sh --stress) a live master can answer later, and an acquire with --retry-count 0 that needs
# every live master would fail by chance. Likewise failover-pause.sh's bound on each call's
# end-to-end time (default 2000 ms) is about not waiting for the paused masters, not speed.
SCRIPT_ENV = {"FAILOVER_NODE_TIMEOUT": TEST_NODE_TIMEOUT, "FAILOVER_MAX_MS": "5000"}


class Failover(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="redlock-failover-test-")
        cls.base = free_base(COUNT)
        cls.nodes = ",".join("127.0.0.1:%d" % (cls.base + i) for i in range(COUNT))
        r = subprocess.run([CLI, "cluster", "up", "--count", str(COUNT), "--base-port", str(cls.base),
                            "--dir", cls.dir], capture_output=True, timeout=60)
        if r.returncode != 0:
            shutil.rmtree(cls.dir, ignore_errors=True)
            raise RuntimeError("cluster up failed: %s" % r.stderr.decode())
        try:
            for i in range(COUNT):
                check_server(cls.base + i)  # the server REDLOCK_TEST_SERVER_NAME names (Valkey runs)
        except BaseException:
            cls.tearDownClass()
            raise

    @classmethod
    def tearDownClass(cls):
        subprocess.run([CLI, "cluster", "down", "--dir", cls.dir], capture_output=True, timeout=30)
        shutil.rmtree(cls.dir, ignore_errors=True)

    def script(self, name, *args, **env):
        e = clean_env(REDLOCK_CLI=CLI, REDLOCK_NODES=self.nodes, REDLOCK_CLUSTER_DIR=self.dir,
                      **dict(SCRIPT_ENV, **env))  # a test's own FAILOVER_* win
        return subprocess.run([os.path.join(SCRIPTS, name)] + list(args), capture_output=True,
                              timeout=120, env=e)

    def assert_passed(self, r, name):
        out = r.stdout.decode()
        self.assertEqual(r.returncode, 0, out + r.stderr.decode())
        self.assertRegex(out.rstrip().splitlines()[-1], r"^%s: all \d+ checks passed$" % name)
        self.assertNotIn("FAIL", out)

    def assert_all_up(self):
        r = subprocess.run([CLI, "cluster", "status", "--dir", self.dir, "--json"], capture_output=True,
                           timeout=30)
        self.assertEqual([n["state"] for n in json.loads(r.stdout)["nodes"]], ["up"] * COUNT)

    def test_minority(self):
        r = self.script("failover-minority.sh")
        self.assert_passed(r, "failover-minority.sh")
        out = r.stdout.decode()
        self.assertIn("no quorum (exit 3", out)
        self.assertEqual(out.count("  kill node"), COUNT - (COUNT // 2 + 1) + 1)
        self.assert_all_up()

    def test_pause(self):
        r = self.script("failover-pause.sh")
        self.assert_passed(r, "failover-pause.sh")
        self.assertIn("no quorum (exit 3", r.stdout.decode())
        self.assert_all_up()

    def test_restart(self):
        r = self.script("failover-restart.sh")
        self.assert_passed(r, "failover-restart.sh")
        out = r.stdout.decode()
        self.assertIn("excluded by the restart guard", out)
        self.assertIn("two holders", out)
        self.assert_all_up()

    def test_node_list_flag_and_command_templates(self):
        # As an operator points them at real hosts: -n LIST and commands with {host} {port} {index}.
        kill = "%s cluster kill $(( {port} - %d )) --dir %s" % (CLI, self.base - 1, self.dir)
        start = "test {host} = 127.0.0.1 && %s cluster start {index} --dir %s" % (CLI, self.dir)
        e = clean_env(REDLOCK_CLI=CLI, FAILOVER_KILL=kill, FAILOVER_START=start, **SCRIPT_ENV)
        r = subprocess.run([os.path.join(SCRIPTS, "failover-restart.sh"), "-n", self.nodes], capture_output=True,
                           timeout=120, env=e)
        self.assert_passed(r, "failover-restart.sh")
        self.assert_all_up()

    def test_a_failed_check_exits_1_and_restores_the_nodes(self):
        r = self.script("failover-pause.sh", FAILOVER_MAX_MS="0")  # no acquire is that fast
        self.assertEqual(r.returncode, 1, r.stdout.decode() + r.stderr.decode())
        self.assertIn("FAIL ", r.stdout.decode())
        self.assertIn(b"FAILED", r.stderr)
        self.assert_all_up()  # the paused master was resumed on the way out

    def test_refuses_nodes_it_could_not_put_back(self):
        # Remote masters without FAILOVER_* commands, or a kill without a start: exit 2 up front.
        for env, args in (({}, ["-n", "10.0.0.1:6379,10.0.0.2:6379,10.0.0.3:6379"]),
                          ({"FAILOVER_KILL": "false"}, [])):
            r = self.script("failover-minority.sh", *args, **env)
            self.assertEqual(r.returncode, 2, (env, args, r.stdout, r.stderr))
            self.assertIn(b"FAILOVER_START", r.stderr)
            self.assertNotIn(b"kill node", r.stdout)
        self.assert_all_up()

    def test_usage_errors_exit_2_before_touching_a_master(self):
        # A malformed node list or a stray argument is the operator's mistake, not a failed
        # failover check: exit 2, no "ok" line claiming the masters answer, nothing killed.
        # (FAILOVER_* commands that would fail loudly, so the list is not checked against the
        # local cluster first.)
        env = {"FAILOVER_KILL": "false", "FAILOVER_START": "false"}
        for args, needle in ((["-n", "foo:bar"], b"foo:bar"),
                             (["-n", "127.0.0.1:1,,127.0.0.1:2"], b"empty"),
                             (["-n", self.nodes, "extra"], b"extra")):
            with self.subTest(args=args):
                r = self.script("failover-minority.sh", *args, **env)
                self.assertEqual(r.returncode, 2, r.stdout.decode() + r.stderr.decode())
                self.assertIn(needle, r.stderr)
                self.assertNotIn(b"ok ", r.stdout)
                self.assertNotIn(b"kill node", r.stdout)
        self.assert_all_up()

    def test_help(self):
        for name in ("failover-minority.sh", "failover-pause.sh", "failover-restart.sh"):
            r = subprocess.run([os.path.join(SCRIPTS, name), "-h"], capture_output=True, timeout=30)
            self.assertEqual(r.returncode, 0, name)
            self.assertIn(b"FAILOVER_", r.stdout, name)
            self.assertIn(b"Usage:", r.stdout, name)

    def test_shellcheck(self):
        if shutil.which("shellcheck") is None:
            self.skipTest("shellcheck is not installed")
        names = [n for n in os.listdir(SCRIPTS) if n.startswith(("failover-", "demo"))]
        r = subprocess.run(["shellcheck", "-x"] + [os.path.join(SCRIPTS, n) for n in sorted(names)],
                           capture_output=True, timeout=60, cwd=SCRIPTS)
        self.assertEqual(r.returncode, 0, r.stdout.decode())


class FailoverOverTls(unittest.TestCase):
    """One script (-t) on a TLS-only cluster (`cluster up --tls`): the failover path over TLS."""

    def test_pause_over_tls(self):
        d = tempfile.mkdtemp(prefix="redlock-failover-tls-")
        try:
            base = free_base(3)
            r = subprocess.run([CLI, "cluster", "up", "--tls", "--count", "3", "--base-port", str(base),
                                "--dir", d], capture_output=True, timeout=60, env=clean_env())
            self.assertEqual(r.returncode, 0, r.stderr.decode())
            nodes = ",".join("127.0.0.1:%d" % (base + i) for i in range(3))
            # No REDLOCK_CACERT: -t finds the local cluster's CA itself.
            e = clean_env(REDLOCK_CLI=CLI, REDLOCK_CLUSTER_DIR=d, **SCRIPT_ENV)
            r = subprocess.run([os.path.join(SCRIPTS, "failover-pause.sh"), "-t", "-n", nodes],
                               capture_output=True, timeout=120, env=e)
            out = r.stdout.decode()
            self.assertEqual(r.returncode, 0, out + r.stderr.decode())
            self.assertIn("3 masters (%s) over TLS, quorum 2" % nodes, out)
            self.assertRegex(out.rstrip().splitlines()[-1], r"^failover-pause.sh: all \d+ checks passed$")
            self.assertIn("no quorum (exit 3", out)
            # The same without -t talks plaintext to TLS-only nodes: the precheck fails.
            r = subprocess.run([os.path.join(SCRIPTS, "failover-pause.sh"), "-n", nodes],
                               capture_output=True, timeout=120, env=e)
            self.assertEqual(r.returncode, 1, r.stdout.decode())
        finally:
            subprocess.run([CLI, "cluster", "down", "--dir", d], capture_output=True, timeout=30)
            shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    unittest.main(verbosity=2)
