#!/usr/bin/env python3
"""Interop: the wire format of docs (design/algorithm.md, "Wire format") against an independent
client, redis-py's `redis.lock.Lock` (Debian package python3-redis).

redis-py takes a lock on one node with `SET name token NX PX ms` and releases it with a
compare-and-delete script, as the Redlock documentation says. A lock redlock-cli takes must keep
redis-py's Lock out on every node and look exactly as documented there (key = resource, value =
the token, a PX expiry), and the other way round: redis-py's locks on a majority make
`redlock-cli acquire` fail with exit 1 (held elsewhere, cli.md) and leave redis-py's keys alone,
and each releases the other's lock given the same token, never with another one.

Servers: tests/cli/redisfix.py ($REDLOCK_TEST_REDIS_SERVER, checked against
$REDLOCK_TEST_SERVER_NAME), so meson runs the file against Redis 7, Valkey 8, Valkey 9.1 and
Redis 8.0. On Valkey 9.1 the CLI also releases and extends with DELIFEQ and SET IFEQ
(--commands native): the same locks.
"""

import os
import re
import secrets
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "cli"))
from redisfix import Cluster, wait_until  # noqa: E402

try:
    import redis
    from redis.exceptions import LockNotOwnedError
    from redis.lock import Lock
except ImportError:
    sys.exit("interop: redis-py is missing (Debian package python3-redis): run scripts/setup.sh, "
             "which installs it (python: %s)" % sys.executable)

CLI = os.path.abspath(os.environ.get("REDLOCK_CLI", "redlock-cli"))
TOKEN = re.compile(r"^[0-9a-f]{40}$")


def cli(nodes, *args, timeout=30):
    env = {k: v for k, v in os.environ.items() if not k.startswith("REDLOCK_")}
    return subprocess.run([CLI, "-n", nodes, "--retry-count", "0"] + list(args), capture_output=True,
                          text=True, env=env, timeout=timeout)


class Interop:
    """The tests, on a cluster of COUNT nodes (subclasses: 3 and 5)."""
    COUNT = 0

    @classmethod
    def setUpClass(cls):
        cls.c = Cluster(cls.COUNT)
        cls.clients = [redis.Redis(host="127.0.0.1", port=s.port, socket_timeout=5) for s in cls.c.servers]

    @classmethod
    def tearDownClass(cls):
        for r in cls.clients:
            r.close()
        cls.c.close()

    def setUp(self):
        for r in self.clients:
            r.flushall()

    @property
    def majority(self):
        return self.COUNT // 2 + 1

    def key(self, name):
        return "interop-%d-%s" % (self.COUNT, name)

    def values(self, key):
        return [r.get(key) for r in self.clients]

    def acquire(self, key, *args):
        r = cli(self.c.nodes, "acquire", key, *args)
        self.assertEqual(r.returncode, 0, r.stderr)
        token = r.stdout.strip()
        self.assertRegex(token, TOKEN)
        # acquire returns once a quorum answered: the other SETs are on their way.
        self.assertTrue(wait_until(lambda: self.values(key) == [token.encode()] * self.COUNT),
                        self.values(key))
        return token

    def test_a_cli_lock_keeps_redis_py_out_and_is_the_documented_key(self):
        key = self.key("cli-held")
        token = self.acquire(key, "--ttl", "20s")
        for i, r in enumerate(self.clients):
            with self.subTest(node=i):
                # The key is the resource itself (no prefix), a plain string holding the token,
                # with the ttl as a PX expiry.
                self.assertEqual(r.type(key), b"string")
                self.assertEqual(r.get(key), token.encode())
                pttl = r.pttl(key)
                self.assertLessEqual(pttl, 20000)
                self.assertGreater(pttl, 10000)
                lock = Lock(r, key, timeout=5)
                self.assertFalse(lock.acquire(blocking=False))
                # redis-py's failed SET NX changed nothing.
                self.assertEqual(r.get(key), token.encode())
                self.assertGreater(r.pttl(key), 10000)

    def test_redis_py_on_a_majority_makes_cli_acquire_exit_1(self):
        key = self.key("py-majority")
        held = [Lock(r, key, timeout=20) for r in self.clients[:self.majority]]
        for lock in held:
            self.assertTrue(lock.acquire(blocking=False))
        tokens = [lock.local.token for lock in held]
        r = cli(self.c.nodes, "acquire", key)
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)  # cli.md: held by someone else
        self.assertEqual(r.stdout, "")
        # redis-py's keys are untouched; the nodes the CLI did get were given back (its
        # compare-and-delete), so nothing of the failed attempt stays.
        self.assertEqual(self.values(key)[:self.majority], tokens)
        self.assertTrue(wait_until(lambda: self.values(key)[self.majority:] == [None] * (self.COUNT - self.majority)),
                        self.values(key))
        for lock in held:
            lock.release()
        self.assertEqual(self.values(key), [None] * self.COUNT)

    def test_redis_py_on_a_minority_does_not_stop_the_cli(self):
        key = self.key("py-minority")
        minority = self.COUNT - self.majority
        held = [Lock(r, key, timeout=20) for r in self.clients[:minority]]
        for lock in held:
            self.assertTrue(lock.acquire(blocking=False))
        r = cli(self.c.nodes, "acquire", key)
        self.assertEqual(r.returncode, 0, r.stderr)
        token = r.stdout.strip()
        self.assertTrue(wait_until(lambda: self.values(key)[minority:] == [token.encode()] * self.majority),
                        self.values(key))
        self.assertEqual(self.values(key)[:minority], [lock.local.token for lock in held])

    def test_cli_release_with_another_token_leaves_redis_py_keys(self):
        key = self.key("py-held")
        held = [Lock(r, key, timeout=20) for r in self.clients]
        for lock in held:
            self.assertTrue(lock.acquire(blocking=False))
        tokens = [lock.local.token for lock in held]
        r = cli(self.c.nodes, "release", key, secrets.token_hex(20))
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)  # no reachable node held this token
        self.assertEqual(self.values(key), tokens)
        for lock in held:
            lock.release()
        self.assertEqual(self.values(key), [None] * self.COUNT)

    def test_cli_releases_a_redis_py_lock_with_its_token(self):
        key = self.key("py-token")
        token = secrets.token_hex(20)
        held = [Lock(r, key, timeout=20) for r in self.clients]
        for lock in held:
            self.assertTrue(lock.acquire(blocking=False, token=token))
        self.assertEqual(self.values(key), [token.encode()] * self.COUNT)
        r = cli(self.c.nodes, "release", key, token)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertTrue(wait_until(lambda: self.values(key) == [None] * self.COUNT), self.values(key))

    def test_redis_py_releases_a_cli_lock_with_its_token_only(self):
        key = self.key("cli-token")
        token = self.acquire(key)
        for i, r in enumerate(self.clients):
            with self.subTest(node=i):
                wrong = Lock(r, key)
                wrong.local.token = secrets.token_hex(20).encode()
                with self.assertRaises(LockNotOwnedError):
                    wrong.release()
                self.assertEqual(r.get(key), token.encode())
                lock = Lock(r, key)
                lock.local.token = token.encode()
                lock.release()  # raises LockNotOwnedError if the script deleted nothing
                self.assertIsNone(r.get(key))
        # Nothing is left for the CLI to release.
        r = cli(self.c.nodes, "release", key, token)
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)

    def test_extend_either_way(self):
        # The CLI extends redis-py's lock (same token) and redis-py extends the CLI's.
        key = self.key("py-extend")
        token = secrets.token_hex(20)
        held = [Lock(r, key, timeout=5) for r in self.clients]
        for lock in held:
            self.assertTrue(lock.acquire(blocking=False, token=token))
        r = cli(self.c.nodes, "extend", key, token, "--ttl", "60s")
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertTrue(wait_until(lambda: all(c.pttl(key) > 30000 for c in self.clients)),
                        [c.pttl(key) for c in self.clients])

        key = self.key("cli-extend")
        token = self.acquire(key, "--ttl", "5s")
        for c in self.clients:
            lock = Lock(c, key, timeout=5)
            lock.local.token = token.encode()
            self.assertTrue(lock.extend(60, replace_ttl=True))
            self.assertGreater(c.pttl(key), 30000)
        r = cli(self.c.nodes, "extend", key, secrets.token_hex(20))
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)  # another token: lost


    def native(self):
        """Whether the nodes have DELIFEQ and SET IFEQ (asked of the servers, not of redlock)."""
        try:  # on a key that does not exist: 0 where it exists, an error where it does not
            return self.clients[0].execute_command("DELIFEQ", self.key("no-such-key"), "x") == 0
        except redis.ResponseError:
            return False

    def calls(self, command):
        stats = [c.info("commandstats").get("cmdstat_" + command, {}) for c in self.clients]
        return sum(s.get("calls", 0) for s in stats)

    def test_native_release_and_extend_are_the_same_locks(self):
        # --commands native: DELIFEQ and SET IFEQ (Valkey 9), the same keys and values as the
        # scripts; on a server without them, a refusal by configuration (exit 5) that leaves
        # every key as it was.
        native = self.native()
        key = self.key("native-py")
        token = secrets.token_hex(20)
        held = [Lock(r, key, timeout=5) for r in self.clients]
        for lock in held:
            self.assertTrue(lock.acquire(blocking=False, token=token))
        r = cli(self.c.nodes, "--commands", "native", "extend", key, token, "--ttl", "60s")
        self.assertEqual(r.returncode, 0 if native else 5, r.stdout + r.stderr)
        if native:
            self.assertTrue(wait_until(lambda: all(c.pttl(key) > 30000 for c in self.clients)))
        r = cli(self.c.nodes, "--commands", "native", "release", key, secrets.token_hex(20))
        self.assertEqual(r.returncode, 1 if native else 5, r.stdout + r.stderr)
        self.assertEqual(self.values(key), [token.encode()] * self.COUNT)
        deletes = self.calls("delifeq")
        r = cli(self.c.nodes, "--commands", "native", "release", key, token)
        self.assertEqual(r.returncode, 0 if native else 5, r.stdout + r.stderr)
        if not native:
            self.assertIn("has no DELIFEQ or DELEX IFEQ", r.stderr)
            return
        self.assertEqual(self.calls("delifeq"), deletes + self.COUNT)
        self.assertTrue(wait_until(lambda: self.values(key) == [None] * self.COUNT), self.values(key))
        # redis-py takes the lock released natively, and a CLI lock released natively too.
        for lock in held:
            self.assertTrue(lock.acquire(blocking=False))
            lock.release()
        key = self.key("native-cli")
        token = self.acquire(key, "--ttl", "5s")
        r = cli(self.c.nodes, "--commands", "native", "extend", key, token, "--ttl", "60s")
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertTrue(wait_until(lambda: all(c.pttl(key) > 30000 for c in self.clients)))
        self.assertEqual(self.values(key), [token.encode()] * self.COUNT)
        r = cli(self.c.nodes, "--commands", "native", "release", key, token)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertTrue(wait_until(lambda: self.values(key) == [None] * self.COUNT), self.values(key))
        for c in self.clients:
            self.assertTrue(Lock(c, key, timeout=5).acquire(blocking=False))


class ThreeNodes(Interop, unittest.TestCase):
    COUNT = 3


class FiveNodes(Interop, unittest.TestCase):
    COUNT = 5


if __name__ == "__main__":
    print("interop: redis-py %s against %s (%s)" % (redis.__version__, os.environ.get(
        "REDLOCK_TEST_REDIS_SERVER") or "redis-server", os.environ.get("REDLOCK_TEST_SERVER_NAME") or "any"),
        file=sys.stderr)
    unittest.main()
