#!/usr/bin/env python3
"""`redlock-cli cluster up --topology sentinel` and the lock commands through redis+sentinel:// votes.

Real redis-server processes (data nodes and `redis-server CONF --sentinel`) started by the built
binary. Every test uses its own temporary --dir and free ports, and tearDown runs `cluster down`,
so nothing outlives the test; the tests check that `down` leaves no process behind.
"""

import json
import os
import subprocess
import time
import unittest

from test_cluster import CLI, TopologyCase, alive, clean_env, free_base, pings, redis, wait_until

COUNT = 2                 # votes (masters m1, m2)
PROCS = 2 * COUNT + 3     # masters, replicas, sentinels


def pairs(flat):
    """SENTINEL MASTER/REPLICAS entries come as [k1, v1, k2, v2, ...]."""
    return dict(zip(flat[::2], flat[1::2]))


class SentinelTopology(TopologyCase):
    def setUp(self):
        super().setUp()
        self.base = free_base(PROCS)
        self.ports = [self.base + i for i in range(PROCS)]
        self.sentinels = self.ports[2 * COUNT:]

    # -- helpers (and TopologyCase's) ---------------------------------------------------------

    def up(self):
        return self.ok(self.cluster("up", "--topology", "sentinel", "--count", str(COUNT),
                                    "--base-port", str(self.base)))

    def switched(self, name, port):
        """Every sentinel's SENTINEL MASTER (what clients ask) names `port`, failover over. A
        sentinel that does not answer within the helper's second (seen under --stress) is not
        there yet: the caller polls again."""
        for s in self.sentinels:
            try:
                m = pairs(redis(s, "SENTINEL", "MASTER", name))
            except OSError:
                return False
            if m["port"] != str(port) or m["flags"] != "master":
                return False
        return True

    # -- tests ---------------------------------------------------------------------------------

    def test_up_lock_through_the_sentinels_and_down_leaves_nothing(self):
        r = self.up()
        self.assertEqual(r.stdout.count("started"), PROCS, r.stdout)
        self.assertIn("node 1 (127.0.0.1:%d, master m1): started" % self.base, r.stdout)
        self.assertIn("(127.0.0.1:%d, replica m1): started" % (self.base + COUNT), r.stdout)
        self.assertIn("(127.0.0.1:%d, sentinel): started" % self.sentinels[0], r.stdout)
        votes = ["redis+sentinel://127.0.0.1:%d/m%d?sentinel=127.0.0.1:%d&sentinel=127.0.0.1:%d"
                 % (self.sentinels[0], v, self.sentinels[1], self.sentinels[2])
                 for v in range(1, COUNT + 1)]
        self.assertIn(",".join(votes), r.stdout.splitlines())
        env = self.nodes_env()
        self.assertEqual(env["REDLOCK_NODES"], ",".join(votes))

        nodes = self.status()
        self.assertEqual([n["port"] for n in nodes], self.ports)
        self.assertEqual([n["state"] for n in nodes], ["up"] * PROCS)
        self.assertEqual([n["role"] for n in nodes],
                         ["master"] * COUNT + ["replica"] * COUNT + ["sentinel"] * 3)
        self.assertEqual([n["master_name"] for n in nodes],
                         ["m1", "m2", "m1", "m2", None, None, None])
        pids = [n["pid"] for n in nodes]
        text = self.ok(self.cluster("status")).stdout.splitlines()
        self.assertEqual(text[0].split()[-1], "ROLE")
        self.assertEqual(text[1].split()[-2:], ["master", "m1"])
        self.assertEqual(text[-1].split()[-1], "sentinel")

        # `up` returned once every sentinel knew every replica and the other sentinels.
        for s in self.sentinels:
            for v in range(1, COUNT + 1):
                replicas = [pairs(e) for e in redis(s, "SENTINEL", "REPLICAS", "m%d" % v)]
                self.assertEqual([e["name"] for e in replicas], ["127.0.0.1:%d" % (self.base + COUNT + v - 1)])
                self.assertEqual(replicas[0]["flags"], "slave")
                self.assertEqual(len(redis(s, "SENTINEL", "SENTINELS", "m%d" % v)), 2)

        # The lock commands through the sentinel addresses, from REDLOCK_NODES.
        a = self.run_cli("acquire", "job", "--ttl", "30s", env=env)
        self.assertEqual(a.returncode, 0, a.stderr)
        token = a.stdout.strip()
        # Decided at a quorum of votes: the last SET may land just after, or never (a fresh
        # process's command to a vote whose master the sentinels had not named within the 50 ms
        # node deadline is dropped, as a timed-out vote). On a quorum, and nothing else elsewhere.
        def values():
            return [redis(self.base + v, "GET", "job") for v in range(COUNT)]
        wait_until(lambda: values() == [token] * COUNT, timeout=5)
        got = values()
        self.assertGreaterEqual(got.count(token), COUNT // 2 + 1, got)
        self.assertEqual(got.count(token) + got.count(None), COUNT, got)
        b = self.run_cli("acquire", "job", env=env)
        self.assertEqual(b.returncode, 1, b.stdout + b.stderr)
        st = self.run_cli("status", "job", "--json", env=env)
        self.assertEqual(st.returncode, 0, st.stderr)
        per_node = json.loads(st.stdout)["per_node"]
        self.assertEqual([n["value"] for n in per_node], got, per_node)
        self.assertTrue(all(n["node"].startswith("redis+sentinel://") for n in per_node), per_node)
        rel = self.run_cli("release", "job", token, env=env)
        self.assertEqual(rel.returncode, 0, rel.stderr)
        for v in range(COUNT):
            self.assertTrue(wait_until(lambda: redis(self.base + v, "GET", "job") is None, timeout=10), v)

        # bench's raw probes (the SET floor, the final sweep) reach the masters the sentinels
        # name, not the sentinels themselves.
        # A deadline no stall reaches: a timeout is a fair outcome for a benchmark on a busy
        # machine (372 of them at the default 50 ms under --stress), not what this checks.
        bench = self.run_cli("--node-timeout", "2s", "bench", "--concurrency", "1", "--seconds", "1",
                             "--json", env=env)
        self.assertEqual(bench.returncode, 0, bench.stderr)
        figures = json.loads(bench.stdout)
        self.assertNotIn("error", bench.stderr, bench.stderr)
        self.assertEqual(figures["unchecked_nodes"], 0, figures)
        self.assertEqual(figures["keys_left"], 0, figures)
        self.assertGreater(figures["rtt_samples"], 0, figures)

        down = self.ok(self.cluster("down"))
        self.assertEqual(down.stdout.count("stopped") + down.stdout.count("killed"), PROCS, down.stdout)
        for p in pids:
            self.assertFalse(alive(p), "pid %d survived down" % p)
        for port in self.ports:
            self.assertFalse(pings(port, timeout=0.2), port)
        self.assertEqual(sorted(f for f in os.listdir(self.dir) if f.endswith(".pid")), [])
        self.assertEqual([n["state"] for n in self.status()], ["down"] * PROCS)

    def test_a_killed_master_is_failed_over_and_comes_back_as_a_replica(self):
        self.up()
        env = self.nodes_env()
        self.ok(self.cluster("kill", "1"))
        # Sentinel's own failover: down after 2 s, then elected and promoted.
        self.assertTrue(wait_until(lambda: self.switched("m1", self.base + COUNT), timeout=30),
                        self.status())
        # A fresh redlock-cli after the failover: m1's new master was a replica, so its vote waits
        # out the restart quarantine (the library's default, the longest ttl in use but at least
        # 30 s), and m2 alone is no quorum of 2.
        a = self.run_cli("acquire", "after-failover", "--ttl", "10s", "--json", "--retry-count", "0",
                         env=env)
        self.assertEqual(a.returncode, 3, a.stdout + a.stderr)
        m1 = json.loads(a.stdout)["per_node"][0]
        self.assertEqual(m1["state"], "excluded", m1)
        self.assertIn("promoted", m1["detail"])
        r = self.ok(self.cluster("start", "1"))
        self.assertIn("replica m1", r.stdout)
        # status asks each node with a 500 ms deadline: a replica that has just started (and is
        # syncing) may miss it under load and show no role (seen under --stress); asked again.
        self.assertTrue(wait_until(lambda: self.status()[0]["role"] is not None, timeout=20),
                        self.status())
        nodes = self.status()
        self.assertEqual(nodes[0]["role"], "replica")
        self.assertEqual(nodes[COUNT]["role"], "master")
        # `up` finds everything running and waits until the sentinels list node 1 as m1's replica.
        again = self.ok(self.cluster("up"))
        self.assertEqual(again.stdout.count("already running"), PROCS, again.stdout)
        for s in self.sentinels:
            names = [pairs(e)["name"] for e in redis(s, "SENTINEL", "REPLICAS", "m1")]
            self.assertIn("127.0.0.1:%d" % self.base, names)

    def test_tls(self):
        # --tls: TLS-only data nodes and sentinels (tls-replication between them), the votes are
        # rediss+sentinel:// addresses verified against the cluster's own CA.
        r = self.ok(self.cluster("up", "--topology", "sentinel", "--tls", "--count", "1",
                                 "--base-port", str(self.base)))
        self.assertEqual(r.stdout.count("started"), 5, r.stdout)
        env_text = self.ok(self.cluster("env")).stdout
        nodes = "rediss+sentinel://127.0.0.1:%d/m1?sentinel=127.0.0.1:%d&sentinel=127.0.0.1:%d" % (
            self.base + 2, self.base + 3, self.base + 4)
        self.assertIn("export REDLOCK_NODES='%s'" % nodes, env_text)
        self.assertIn("export REDLOCK_CACERT='%s'" % os.path.join(self.dir, "tls", "ca.crt"), env_text)
        env = clean_env(REDLOCK_NODES=nodes, REDLOCK_CACERT=os.path.join(self.dir, "tls", "ca.crt"))
        a = self.run_cli("acquire", "tls-job", env=env)
        self.assertEqual(a.returncode, 0, a.stdout + a.stderr)
        st = json.loads(self.ok(self.run_cli("status", "tls-job", "--json", env=env)).stdout)
        self.assertEqual(st["per_node"][0]["value"], a.stdout.strip())
        # No plaintext anywhere: the same sentinel without TLS gives no vote.
        plain = self.run_cli("acquire", "tls-job-2", "--retry-count", "0",
                             env=clean_env(REDLOCK_NODES=nodes.replace("rediss+", "redis+")))
        self.assertEqual(plain.returncode, 3, plain.stdout + plain.stderr)
        for port in self.ports[:5]:
            self.assertFalse(pings(port, timeout=0.3), port)
        self.ok(self.run_cli("release", "tls-job", a.stdout.strip(), env=env))

    def test_refusals(self):
        r = self.cluster("up", "--topology", "sentinal", "--count", "1", "--base-port", str(self.base))
        self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
        self.assertIn("sentinal", r.stderr.split("--topology", 1)[1])
        # The processes must fit below port 65536: 2*64+3 of them from 65500 do not.
        r = self.cluster("up", "--topology", "sentinel", "--count", "64", "--base-port", "65500")
        self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
        self.assertIn("131", r.stderr)
        self.assertFalse(any(f.endswith(".pid") for f in os.listdir(self.dir)))
        # Standalone nodes running: another topology needs `down` first.
        self.ok(self.cluster("up", "--count", "1", "--base-port", str(self.base)))
        r = self.cluster("up", "--topology", "sentinel")
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertIn("standalone", r.stderr)
        self.assertIn("down", r.stderr)
        self.assertEqual(len([f for f in os.listdir(self.dir) if f.endswith(".pid")]), 1)

    def test_help_names_the_topology(self):
        for args in (("cluster", "up", "--help"), ("demo", "--help")):
            r = subprocess.run([CLI, *args], capture_output=True, text=True, timeout=30)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertIn("--topology", r.stdout)
            self.assertIn("sentinel", r.stdout)


class SentinelAddresses(unittest.TestCase):
    def test_a_bad_sentinel_address_is_a_usage_error_naming_it(self):
        for bad, named in (("redis+sentinel://127.0.0.1:1", "redis+sentinel://127.0.0.1:1"),
                           ("redis+sentinel://127.0.0.1:1/", "redis+sentinel://127.0.0.1:1/"),
                           ("redis+sentinel://127.0.0.1:1/bad!name", "bad!name"),
                           ("redis-sentinel://127.0.0.1:26379", "redis-sentinel://127.0.0.1:26379")):
            with self.subTest(address=bad):
                r = subprocess.run([CLI, "acquire", "-n", bad, "x"], capture_output=True, text=True,
                                   timeout=30, env=clean_env())
                self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
                self.assertIn(named, r.stderr)
                self.assertEqual(r.stdout, "")
        # The password of a bad address is never shown.
        r = subprocess.run([CLI, "acquire", "-n", "redis+sentinel://user:s3cr3tpw@127.0.0.1:1", "x"],
                           capture_output=True, text=True, timeout=30, env=clean_env())
        self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
        self.assertIn("127.0.0.1:1", r.stderr)
        self.assertNotIn("s3cr3tpw", r.stderr + r.stdout)


if __name__ == "__main__":
    unittest.main(verbosity=2)
