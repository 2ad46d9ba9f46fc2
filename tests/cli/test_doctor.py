#!/usr/bin/env python3
"""`redlock-cli doctor` (issue 43 item 6, and issue 41's ACL check) against real servers set up to
trip each warning and each unfit verdict: eviction policy, persistence, a replica, narrow ACL
users, nodes down, a certificate about to expire and one expired, a clock off ours, a wrong
password, a Cluster vote and a Sentinel vote. Exit codes as docs/cli.md says: 0 every node fit,
1 warnings (a quorum usable), 3 fewer than a quorum usable, 5 a quorum refused by configuration."""
import datetime
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from redisfix import Server, query, server_identity, wait_until, with_test_deadline  # noqa: E402
from test_cluster import TopologyCase, clean_env, redis  # noqa: E402
from redisfix import free_base, free_cluster_base  # noqa: E402
from test_json_docs import documented  # noqa: E402
from test_tls import ExpiredCertificate  # noqa: E402

CLI = os.path.abspath(os.environ.get("REDLOCK_CLI", "redlock-cli"))
SECRET = "doctor-secret-never-shown"
PREFIX = "lock:"
# The guide's line for plain locks (docs/guide.md, "ACL for lock users"; test_acl.py runs it).
PLAIN = ("-@all +info +set +get +del +exists +pexpire +pttl +type +time +zadd +zrem +zscore "
         "+zrange +zpopmin +zcard +zcount +zrangebyscore +publish +pubsub|numsub +subscribe "
         "+unsubscribe +eval +evalsha +script|load ~lock:* ~{*}:redlock:*:lock:* "
         "&{*}:redlock:wake:lock:* &__keyspace@*__:lock:*").split()


def doctor(*args, env=None, nodes=None):
    argv = [CLI] + (["-n", nodes] if nodes else []) + list(args) + ["doctor"]
    return subprocess.run(with_test_deadline(argv), capture_output=True, text=True, timeout=60,
                          env=env if env is not None else clean_env(), stdin=subprocess.DEVNULL)


def report(r):
    """The --json object of a doctor run."""
    try:
        return json.loads(r.stdout)
    except ValueError:
        raise AssertionError("not JSON: stdout=%r stderr=%r" % (r.stdout, r.stderr))


def check(node, name):
    """The first check `name` of one node of a --json report."""
    for c in node["checks"]:
        if c["name"] == name:
            return c
    raise AssertionError("no check %s in %s" % (name, node))


class Standalone(unittest.TestCase):
    """Three plain masters (the fixture's: no persistence), changed per test and put back."""

    @classmethod
    def setUpClass(cls):
        cls.servers = [Server() for _ in range(3)]
        cls.nodes = ",".join(s.address for s in cls.servers)

    @classmethod
    def tearDownClass(cls):
        for s in cls.servers:
            s.close()

    def tearDown(self):
        for s in self.servers:
            if not s.running():
                s.start()
            for k, v in (("maxmemory-policy", "noeviction"), ("appendonly", "no"),
                         ("appendfsync", "everysec")):
                self.assertEqual(query(s.port, "CONFIG", "SET", k, v), b"OK")
            self.assertEqual(query(s.port, "REPLICAOF", "NO", "ONE"), b"OK")
            query(s.port, "ACL", "DELUSER", "narrow")

    def run_json(self, *args, nodes=None):
        r = doctor("--json", *args, nodes=nodes or self.nodes)
        return r.returncode, report(r), r

    def assert_no_probe_key(self):
        for s in self.servers:
            self.assertTrue(wait_until(lambda: query(s.port, "KEYS", "*redlock-doctor*") == []),
                            query(s.port, "KEYS", "*"))

    def test_fit_nodes_exit_0_and_say_what_they_are(self):
        # The restart guard on makes no persistence acceptable: every node is fit.
        r = doctor("--min-uptime", "1s", nodes=self.nodes)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        lines = r.stdout.splitlines()
        self.assertEqual(len(lines), 4, r.stdout)  # a line per node, the verdict
        name, version = server_identity(self.servers[0].port)
        for s, line in zip(self.servers, lines):
            self.assertTrue(line.startswith(s.address), line)
            self.assertEqual(line.split()[1], "fit", line)
            self.assertIn("%s %s, master" % (name, version), line)
            self.assertIn("noeviction", line)
            self.assertIn("acl ok", line)
        self.assertTrue(lines[-1].startswith("fit: 3 of 3 nodes can hold locks (a quorum is 2)"),
                        lines[-1])
        code, obj, _ = self.run_json("--min-uptime", "1s")
        self.assertEqual((code, obj["verdict"], obj["quorum"], obj["fit"]), (0, "fit", 2, 3))
        # The man page's JSON OUTPUT lists exactly these fields.
        self.assertEqual(sorted(obj), sorted(documented()["doctor --json"]))
        for n in obj["nodes"]:
            self.assertEqual((n["verdict"], n["server"], n["version"], n["role"]),
                             ("fit", name, version, "master"))
            self.assertEqual({c["status"] for c in n["checks"]}, {"ok"}, n)
            self.assertRegex(check(n, "clock")["message"], r"against ours \(round trip")
        self.assert_no_probe_key()

    def test_eviction_policy_is_a_warning_with_the_fix(self):
        query(self.servers[0].port, "CONFIG", "SET", "maxmemory-policy", "allkeys-lru")
        query(self.servers[1].port, "CONFIG", "SET", "maxmemory-policy", "volatile-ttl")
        code, obj, _ = self.run_json("--min-uptime", "1s")
        self.assertEqual((code, obj["verdict"], obj["warnings"]), (1, "warnings", 2), obj)
        for n, policy in zip(obj["nodes"], ["allkeys-lru", "volatile-ttl", None]):
            c = check(n, "maxmemory-policy")
            if policy:
                self.assertEqual((n["verdict"], c["status"]), ("warning", "warn"))
                self.assertIn(policy + " can evict a held lock", c["message"])
                self.assertIn("CONFIG SET maxmemory-policy noeviction", c["message"])
            else:
                self.assertEqual(c["status"], "ok")
        r = doctor("--min-uptime", "1s", nodes=self.nodes)
        self.assertEqual(r.returncode, 1)
        self.assertIn("    warn maxmemory-policy: maxmemory-policy allkeys-lru can evict", r.stdout)
        self.assertTrue(r.stdout.splitlines()[-1].startswith("warnings: 3 of 3 nodes"), r.stdout)

    def test_persistence(self):
        # No AOF and no restart guard: a warning that says what to do.
        code, obj, _ = self.run_json()
        self.assertEqual(code, 1, obj)
        for n in obj["nodes"]:
            c = check(n, "persistence")
            self.assertEqual(c["status"], "warn")
            self.assertIn("no AOF and the restart guard off", c["message"])
            self.assertIn("--min-uptime", c["message"])
        # With the guard: what the guard costs, no warning.
        code, obj, _ = self.run_json("--min-uptime", "1m")
        self.assertEqual(code, 0, obj)
        self.assertIn("costs this node its vote for that long",
                      check(obj["nodes"][0], "persistence")["message"])
        # appendfsync always: fencing counters survive, without the guard too.
        for s in self.servers:
            query(s.port, "CONFIG", "SET", "appendonly", "yes")
            query(s.port, "CONFIG", "SET", "appendfsync", "always")
        code, obj, _ = self.run_json()
        self.assertEqual(code, 0, obj)
        c = check(obj["nodes"][2], "persistence")
        self.assertEqual(c["status"], "ok")
        self.assertIn("fencing counters survive", c["message"])

    def test_a_replica_is_unfit(self):
        replica = self.servers[2]
        self.assertEqual(query(replica.port, "REPLICAOF", "127.0.0.1", str(self.servers[0].port)),
                         b"OK")
        code, obj, _ = self.run_json("--min-uptime", "1s")
        self.assertEqual((code, obj["verdict"], obj["fit"], obj["unfit"]), (1, "warnings", 2, 1))
        n = obj["nodes"][2]
        self.assertEqual((n["verdict"], n["role"]), ("unfit", "slave"))
        c = check(n, "role")
        self.assertEqual(c["status"], "fail")
        self.assertIn("a replica of 127.0.0.1:%d" % self.servers[0].port, c["message"])
        self.assertIn("READONLY", c["message"])

    def test_one_node_down_leaves_a_quorum(self):
        self.servers[1].kill()
        r = doctor("--min-uptime", "1s", nodes=self.nodes)
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        line = r.stdout.splitlines()[1]
        self.assertEqual(line.split()[:3], [self.servers[1].address, "unfit", "down"], line)
        self.assertIn("    fail reachable: down: ", r.stdout)
        self.assertIn("warnings: 2 of 3 nodes can hold locks (a quorum is 2), 1 unfit",
                      r.stdout)

    def test_the_default_nodes_are_named_as_such(self):
        # Whatever answers on 7001-7005 on this machine: the verdict says whose nodes these are.
        r = doctor()
        self.assertIn(r.returncode, (0, 1, 3, 5), r.stderr)
        self.assertIn("(the default nodes 127.0.0.1:7001-7005: set -n or REDLOCK_NODES)",
                      r.stdout.splitlines()[-1])

    def test_three_of_five_down_is_no_quorum(self):
        more = [Server() for _ in range(2)]
        try:
            nodes = ",".join(s.address for s in self.servers + more)
            for s in [self.servers[0]] + more:
                s.kill()
            code, obj, r = self.run_json("--min-uptime", "1s", nodes=nodes)
            self.assertEqual((code, obj["verdict"], obj["fit"], obj["unfit"], obj["quorum"]),
                             (3, "unfit", 2, 3, 3), r.stdout + r.stderr)
            self.assertEqual([n["verdict"] for n in obj["nodes"]],
                             ["unfit", "fit", "fit", "unfit", "unfit"])
            self.assertEqual(check(obj["nodes"][0], "reachable")["status"], "fail")
        finally:
            for s in more:
                s.close()

    def narrow(self, without=(), extra=()):
        """The guide's plain line minus `without` (plus `extra`) as user `narrow` on every node;
        the nodes as that user."""
        rules = [p for p in PLAIN if p not in without] + list(extra)
        for s in self.servers:
            self.assertEqual(query(s.port, "ACL", "SETUSER", "narrow", "reset", "on", ">" + SECRET,
                                   *rules), b"OK")
        return ",".join("redis://narrow:%s@%s" % (SECRET, s.address) for s in self.servers)

    def test_acl_of_the_guides_plain_user(self):
        code, obj, r = self.run_json("--key-prefix", PREFIX, "--min-uptime", "1s",
                                     nodes=self.narrow())
        self.assertNotIn(SECRET, r.stdout + r.stderr)
        # Plain locks, wake-ups and the guard work; the other kinds need more (a warning each).
        self.assertEqual((code, obj["verdict"]), (1, "warnings"), obj)
        n = obj["nodes"][0]
        for feature in ("plain", "restart-guard", "wake-ups", "script-cache"):
            self.assertEqual(check(n, "acl-" + feature)["status"], "ok", feature)
        self.assertIn("lacks +incr", check(n, "acl-fencing")["message"])
        self.assertIn("lacks +incr +hset +hget +hdel +zrank", check(n, "acl-fair")["message"])
        self.assertIn("lacks +zremrangebyscore +pexpireat", check(n, "acl-read-write")["message"])
        for name in ("acl-fencing", "acl-fair", "acl-read-write"):
            self.assertEqual(check(n, name)["status"], "warn")
        # CONFIG is refused to a lock user: "cannot read", which is no failure.
        c = check(n, "maxmemory-policy")
        self.assertEqual(c["status"], "skip")
        self.assertIn("cannot read", c["message"])
        self.assert_no_probe_key()
        # Without the key prefix the user's patterns cover no lock key: plain locks are refused.
        code, obj, _ = self.run_json(nodes=self.narrow())
        self.assertEqual((code, obj["verdict"]), (5, "refused"), obj)

    def test_acl_without_info_is_unfit_and_says_so(self):
        for extra in ((), ("+acl|dryrun",)):  # probed, then asked with ACL DRYRUN
            with self.subTest(extra=extra):
                code, obj, r = self.run_json("--key-prefix", PREFIX,
                                             nodes=self.narrow(["+info"], extra))
                self.assertEqual((code, obj["verdict"], obj["refused"]), (5, "refused", 3), obj)
                c = check(obj["nodes"][1], "acl-restart-guard")
                self.assertEqual(c["status"], "fail")
                self.assertIn("lacks +info", c["message"])
                self.assertIn("no vote", c["message"])
                self.assertTrue(c["message"].endswith("(asked ACL DRYRUN)" if extra else "(probed)"),
                                c["message"])
                self.assertEqual(check(obj["nodes"][1], "acl-plain")["status"], "ok")
                self.assertEqual(check(obj["nodes"][1], "server")["status"], "skip")
                self.assertNotIn(SECRET, r.stdout + r.stderr)
                self.assert_no_probe_key()

    def test_acl_without_scripts(self):
        code, obj, _ = self.run_json("--key-prefix", PREFIX, "--min-uptime", "1s",
                                     nodes=self.narrow(["+eval", "+evalsha"]))
        self.assertEqual((code, obj["verdict"]), (5, "refused"), obj)
        c = check(obj["nodes"][0], "acl-plain")
        self.assertEqual(c["status"], "fail")
        self.assertIn("lacks +eval +evalsha", c["message"])
        self.assert_no_probe_key()

    def test_a_node_without_scripts(self):
        """A node that refuses scripts (as some proxies do): on a server with native
        compare-and-delete and compare-and-set-ttl (Valkey 9) plain locks need none, and only
        the lock kinds that need a script are refused; elsewhere the node is unfit."""
        lua_free = Server(["--rename-command", "EVAL", "", "--rename-command", "EVALSHA", ""])
        try:
            nodes = ",".join([lua_free.address] + [s.address for s in self.servers[1:]])
            code, obj, r = self.run_json("--min-uptime", "1s", nodes=nodes)
            n = obj["nodes"][0]
            caps = check(n, "capabilities")
            self.assertEqual(caps["status"], "ok", caps)
            self.assertIn("EVAL and EVALSHA are missing", caps["message"])
            self.assertEqual(code, 1, r.stdout)
            for kind in ("fencing", "fair", "read-write"):
                c = check(n, "acl-" + kind)
                self.assertEqual(c["status"], "warn")
                self.assertIn("cannot run +eval +evalsha", c["message"])
            plain = check(n, "acl-plain")
            if "without a script" in caps["message"]:  # native release and extend
                self.assertEqual((n["verdict"], plain["status"]), ("warning", "ok"), n)
            else:
                self.assertEqual((n["verdict"], plain["status"]), ("unfit", "fail"), n)
                self.assertIn("cannot run +eval +evalsha", plain["message"])
            self.assertEqual(check(obj["nodes"][1], "acl-plain")["status"], "ok")
        finally:
            lua_free.close()

    def test_wrong_password_is_refused_without_showing_it(self):
        self.narrow()
        wrong = "wrong-" + SECRET
        nodes = ",".join("redis://narrow:%s@%s" % (wrong, s.address) for s in self.servers)
        for args in ((), ("--json",)):
            r = doctor(*args, nodes=nodes)
            self.assertEqual(r.returncode, 5, r.stdout + r.stderr)
            self.assertNotIn(wrong, r.stdout + r.stderr)
            self.assertNotIn(SECRET, r.stdout + r.stderr)
            self.assertIn("AUTH failed", r.stdout)

    def test_a_clock_off_ours_is_a_warning(self):
        lib = (glob.glob("/usr/lib/*/faketime/libfaketime.so.1") or [None])[0]
        if lib is None:
            self.skipTest("libfaketime not installed")
        # Our wall clock 10 s behind every node's (the servers' cannot be faked: testing.md).
        env = clean_env(LD_PRELOAD=lib, FAKETIME="-10s", FAKETIME_DONT_FAKE_MONOTONIC="1")
        r = doctor("--json", "--min-uptime", "1s", env=env, nodes=self.nodes)
        if "ASan runtime does not come first" in r.stderr:
            self.skipTest("libfaketime cannot be preloaded into an AddressSanitizer build")
        obj = report(r)
        self.assertEqual((r.returncode, obj["verdict"]), (1, "warnings"), obj)
        for n in obj["nodes"]:
            c = check(n, "clock")
            self.assertEqual(c["status"], "warn")
            self.assertRegex(c["message"], r"^\+(9\.9|10\.0|10\.1) s against ours")
            self.assertIn("synchronise the clocks", c["message"])


class Certificates(unittest.TestCase):
    """A node whose certificate expires in 10 days (a warning) and one whose certificate has
    expired (unfit, refused: with verification the handshake fails; without, doctor still says)."""

    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="redlock-doctor-tls-")
        cls.servers = []
        try:
            cls.make_certificates()
            for cert in ("soon", "expired"):
                server = Server(tls=(cls.path(cert + ".crt"), cls.path("srv.key"), cls.path("ca.crt")))
                cls.servers.append((server, server.tls_port))
        except Exception:
            cls.tearDownClass()
            raise

    @classmethod
    def path(cls, name):
        return os.path.join(cls.dir, name)

    @classmethod
    def make_certificates(cls):
        def openssl(*args):
            subprocess.run(["openssl"] + list(args), cwd=cls.dir, check=True, capture_output=True,
                           timeout=60)
        openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out",
                "ca.crt", "-subj", "/CN=redlock-doctor-test-ca", "-days", "3650")
        openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", "srv.key", "-out", "srv.csr",
                "-subj", "/CN=localhost", "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost")
        os.mkdir(cls.path("db"))
        with open(cls.path("db/index.txt"), "w"):
            pass
        with open(cls.path("db/index.txt.attr"), "w") as f:
            f.write("unique_subject = no\n")  # two certificates for the one server key
        with open(cls.path("db/serial"), "w") as f:
            f.write("01\n")
        with open(cls.path("ca.cnf"), "w") as f:
            f.write(ExpiredCertificate.CA_CONFIG)
        now = datetime.datetime.now(datetime.timezone.utc)
        stamp = "%Y%m%d%H%M%SZ"
        for name, start, end in (
                ("soon", now - datetime.timedelta(days=1), now + datetime.timedelta(days=10, hours=1)),
                ("expired", datetime.datetime(2020, 1, 1), datetime.datetime(2020, 2, 1))):
            openssl("ca", "-batch", "-config", "ca.cnf", "-cert", "ca.crt", "-keyfile", "ca.key",
                    "-startdate", start.strftime(stamp), "-enddate", end.strftime(stamp),
                    "-in", "srv.csr", "-out", name + ".crt")

    @classmethod
    def tearDownClass(cls):
        for server, _ in cls.servers:
            server.close()
        shutil.rmtree(cls.dir, ignore_errors=True)

    def node(self, which):
        return "rediss://127.0.0.1:%d" % self.servers[which][1]

    def test_a_certificate_expiring_in_10_days_is_a_warning(self):
        r = doctor("--json", "--min-uptime", "1s", "--cacert", self.path("ca.crt"),
                   nodes=self.node(0))
        obj = report(r)
        self.assertEqual((r.returncode, obj["verdict"]), (1, "warnings"), obj)
        c = check(obj["nodes"][0], "tls")
        self.assertEqual(c["status"], "warn")
        self.assertRegex(c["message"], r"^TLSv1\.[23], the server's certificate expires in 10 days")

    def test_an_expired_certificate_is_unfit(self):
        r = doctor("--json", "--min-uptime", "1s", "--cacert", self.path("ca.crt"),
                   nodes=self.node(1))
        obj = report(r)
        self.assertEqual((r.returncode, obj["verdict"]), (5, "refused"), obj)
        c = check(obj["nodes"][0], "reachable")
        self.assertEqual(c["status"], "fail")
        self.assertIn("certificate has expired", c["message"])
        # Without verification the handshake succeeds, and doctor still says it.
        r = doctor("--json", "--min-uptime", "1s", "--insecure", nodes=self.node(1))
        obj = report(r)
        self.assertEqual((r.returncode, obj["verdict"]), (3, "unfit"), obj)
        c = check(obj["nodes"][0], "tls")
        self.assertEqual(c["status"], "fail")
        self.assertIn("expired on 2020-02-01", c["message"])


class Votes(TopologyCase):
    """A Cluster vote and a Sentinel vote, from `cluster up --topology ...`."""

    def test_cluster_vote(self):
        base = free_cluster_base(3)
        self.ok(self.cluster("up", "--topology", "cluster", "--count", "1", "--replicas", "0",
                             "--base-port", str(base)))
        env = self.nodes_env()
        r = self.run_cli("--json", "--min-uptime", "1s", "doctor", env=env)
        obj = report(r)
        self.assertEqual((r.returncode, obj["verdict"]), (0, "fit"), obj)
        n = obj["nodes"][0]
        self.assertTrue(n["node"].startswith("redis+cluster://"), n)
        c = check(n, "cluster")
        self.assertEqual(c["status"], "ok")
        self.assertEqual(c["message"], "cluster_state ok, 16384 of 16384 slots served, 3 masters")
        # Each master checked: its line names it.
        for port in range(base, base + 3):
            self.assertIn("127.0.0.1:%d: master" % port,
                          [m["message"] for m in n["checks"] if m["name"] == "role"])
        # A master gone: slots not served, the vote unfit.
        self.ok(self.cluster("kill", "3"))
        r = self.run_cli("--json", "--min-uptime", "1s", "doctor", env=env)
        obj = report(r)
        self.assertEqual((r.returncode, obj["verdict"]), (3, "unfit"), obj)
        self.assertEqual(check(obj["nodes"][0], "reachable")["status"], "fail")

    def test_sentinel_vote_with_the_sentinels_credentials(self):
        base = free_base(5)
        self.ok(self.cluster("up", "--topology", "sentinel", "--count", "1", "--base-port",
                             str(base)))
        env = self.nodes_env()
        vote = env["REDLOCK_NODES"]
        sentinels = [base + 2, base + 3, base + 4]
        r = self.run_cli("--json", "--min-uptime", "1s", "doctor", env=env)
        obj = report(r)
        self.assertEqual((r.returncode, obj["verdict"]), (0, "fit"), obj)
        c = check(obj["nodes"][0], "sentinel")
        self.assertEqual(c["message"], "master m1 at 127.0.0.1:%d, named by 3 of 3 sentinels "
                                       "(their quorum: 2)" % base)
        self.assertEqual(obj["nodes"][0]["role"], "master")
        # Sentinels that require a password: asked with ?sentinel_user=&sentinel_password=.
        for port in sentinels:
            self.assertEqual(redis(port, "ACL", "SETUSER", "watcher", "on", ">" + SECRET, "+@all"),
                             "OK")
        good = vote + "&sentinel_user=watcher&sentinel_password=" + SECRET
        r = self.run_cli("--json", "--min-uptime", "1s", "doctor", env=dict(env, REDLOCK_NODES=good))
        self.assertEqual(report(r)["verdict"], "fit", r.stdout)
        bad = vote + "&sentinel_user=watcher&sentinel_password=wrong-" + SECRET
        r = self.run_cli("--json", "--min-uptime", "1s", "doctor", env=dict(env, REDLOCK_NODES=bad))
        obj = report(r)
        self.assertEqual((r.returncode, obj["verdict"]), (5, "refused"), obj)
        c = check(obj["nodes"][0], "sentinel")
        self.assertIn("AUTH failed", c["message"])
        self.assertNotIn(SECRET, r.stdout + r.stderr)
        # One sentinel down: still a master, with a warning.
        self.ok(self.cluster("kill", "5"))
        r = self.run_cli("--json", "--min-uptime", "1s", "doctor", env=env)
        obj = report(r)
        self.assertEqual((r.returncode, obj["verdict"]), (1, "warnings"), obj)
        c = check(obj["nodes"][0], "sentinel")
        self.assertEqual(c["status"], "warn")
        self.assertIn("named by 2 of 3 sentinels", c["message"])


if __name__ == "__main__":
    unittest.main(verbosity=2)
