#!/usr/bin/env python3
"""`redlock-cli cluster up --topology cluster` and the lock commands through redis+cluster:// votes.

Real Redis Clusters (redis-server --cluster-enabled yes) started and formed by the built binary.
Every test uses its own temporary --dir and free ports whose cluster bus twins (+10000) are free
too, and tearDown runs `cluster down`, so nothing outlives the test; the tests check that `down`
leaves no process behind.
"""

import json
import os
import re
import shutil
import socket
import ssl
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from redisfix import free_cluster_base, wait_until  # noqa: E402
from test_cluster import CLI, Resp, TopologyCase, alive, clean_env, pings, redis  # noqa: E402

COUNT = 3                  # votes: clusters c1..c3
PER = 6                    # 3 masters and 1 replica each
PROCS = COUNT * PER


def cluster_nodes(port, command=redis):
    """CLUSTER NODES of the node on port: {port: (flags, slot ranges [(a, b)])}."""
    out = {}
    for line in command(port, "CLUSTER", "NODES").splitlines():
        f = line.split()
        p = int(f[1].split("@")[0].rsplit(":", 1)[1])
        ranges = []
        for s in f[8:]:
            if s.startswith("["):
                continue
            a, _, b = s.partition("-")
            ranges.append((int(a), int(b or a)))
        out[p] = (f[2].split(","), ranges)
    return out


def owner(port, slot, command=redis):
    """The port of the master that serves `slot`, as the node on `port` sees it."""
    for p, (flags, ranges) in cluster_nodes(port, command).items():
        if "master" in flags and any(a <= slot <= b for a, b in ranges):
            return p
    return None


class TlsResp(Resp):
    """Resp over TLS, verified against the cluster's own CA."""

    def __init__(self, port, cafile, timeout=2.0):
        ctx = ssl.create_default_context(cafile=cafile)
        raw = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.sock = ctx.wrap_socket(raw, server_hostname="127.0.0.1")
        self.file = self.sock.makefile("rb")


class ClusterVotes(TopologyCase):
    # -- helpers (and TopologyCase's) ---------------------------------------------------------

    def assert_down_leaves_nothing(self, pids, ports):
        down = self.ok(self.cluster("down"))
        self.assertEqual(down.stdout.count("stopped") + down.stdout.count("killed"), len(pids),
                         down.stdout)
        for p in pids:
            self.assertFalse(alive(p), "pid %d survived down" % p)
        for port in ports:
            self.assertFalse(pings(port, timeout=0.2), port)
        self.assertEqual([f for f in os.listdir(self.dir) if f.endswith(".pid")], [])

    # -- tests ---------------------------------------------------------------------------------

    def test_up_lock_on_the_slot_masters_failover_and_down(self):
        base = free_cluster_base(PROCS)
        r = self.ok(self.cluster("up", "--topology", "cluster", "--count", str(COUNT),
                                 "--base-port", str(base)))
        self.assertEqual(r.stdout.count("started"), PROCS, r.stdout)
        self.assertIn("node 1 (127.0.0.1:%d, master c1): started" % base, r.stdout)
        self.assertIn("node 4 (127.0.0.1:%d, replica c1): started" % (base + 3), r.stdout)
        self.assertIn("node 18 (127.0.0.1:%d, replica c3): started" % (base + 17), r.stdout)
        votes = []
        for v in range(COUNT):
            first = base + v * PER
            votes.append("redis+cluster://127.0.0.1:%d?" % first +
                         "&".join("seed=127.0.0.1:%d" % (first + k) for k in range(1, PER)))
        self.assertIn(",".join(votes), r.stdout.splitlines())
        env = self.nodes_env()
        self.assertEqual(env["REDLOCK_NODES"], ",".join(votes))

        # Three separate clusters, each whole: every node says ok and knows the 6 of its own.
        thirds = [[0, 5460], [5461, 10921], [10922, 16383]]
        for v in range(COUNT):
            ports = set(range(base + v * PER, base + (v + 1) * PER))
            for port in ports:
                info = redis(port, "CLUSTER", "INFO")
                self.assertIn("cluster_state:ok", info, port)
                view = cluster_nodes(port)
                self.assertEqual(set(view), ports, port)
                masters = sorted(p for p, (flags, _) in view.items() if "master" in flags)
                self.assertEqual(masters, sorted(ports)[:3], port)
        nodes = self.status()
        self.assertEqual([n["port"] for n in nodes], list(range(base, base + PROCS)))
        self.assertEqual([n["state"] for n in nodes], ["up"] * PROCS)
        self.assertEqual([n["role"] for n in nodes], (["master"] * 3 + ["replica"] * 3) * COUNT)
        self.assertEqual([n["cluster"] for n in nodes],
                         ["c%d" % (i // PER + 1) for i in range(PROCS)])
        self.assertEqual([n["slots"] for n in nodes], ([[t] for t in thirds] + [None] * 3) * COUNT)
        self.assertEqual({n["master_name"] for n in nodes}, {None})
        pids = [n["pid"] for n in nodes]
        text = self.ok(self.cluster("status")).stdout.splitlines()
        self.assertEqual(text[0].split()[-1], "ROLE")
        self.assertTrue(text[1].endswith("master c1 slots 0-5460"), text[1])
        self.assertTrue(text[4].endswith("replica c1"), text[4])

        # The lock through the three cluster votes.
        a = self.run_cli("acquire", "job", "--ttl", "30s", env=env)
        self.assertEqual(a.returncode, 0, a.stdout + a.stderr)
        token = a.stdout.strip()
        slot = redis(base, "CLUSTER", "KEYSLOT", "job")
        st = self.run_cli("status", "job", env=env)
        self.assertEqual(st.returncode, 0, st.stderr)
        where = re.findall(r"(?m)^    key on: slot (\d+) on 127\.0\.0\.1:(\d+)$", st.stdout)
        self.assertEqual(len(where), COUNT, st.stdout)
        for v, (s, port) in enumerate(where):
            port = int(port)
            self.assertEqual(int(s), slot)
            self.assertIn(port, range(base + v * PER, base + (v + 1) * PER))
            self.assertEqual(owner(base + v * PER, slot), port)
        # The acquisition was decided at 2 of 3 votes: the third one's SET may land just after, or
        # never (under --stress a fresh process's command to a vote whose slot map had not come
        # within the 50 ms node deadline was dropped, as a timed-out vote). The token is on the
        # slot's master of a quorum of votes, and nothing else is on the others.
        def values():
            return [redis(int(port), "GET", "job") for _, port in where]
        wait_until(lambda: values() == [token] * COUNT, timeout=5)
        got = values()
        self.assertGreaterEqual(got.count(token), 2, got)
        self.assertEqual(got.count(token) + got.count(None), COUNT, got)
        per_node = json.loads(self.ok(self.run_cli("status", "job", "--json", env=env)).stdout)["per_node"]
        self.assertEqual([n["where"] for n in per_node],
                         ["slot %s on 127.0.0.1:%s" % w for w in where])
        self.assertEqual([n["value"] for n in per_node], got)
        b = self.run_cli("acquire", "job", env=env)
        self.assertEqual(b.returncode, 1, b.stdout + b.stderr)
        self.ok(self.run_cli("release", "job", token, env=env))
        for _, port in where:  # (decided at 2 of 3 votes, like the acquisition)
            self.assertTrue(wait_until(lambda: redis(int(port), "GET", "job") is None, timeout=10), port)

        # c1's master of that slot dies: the cluster promotes its replica, and the vote follows.
        killed = int(where[0][1])
        index = killed - base + 1
        self.ok(self.cluster("kill", str(index)))
        c1 = [p for p in range(base, base + PER) if p != killed]

        def failed_over():
            try:
                return all("cluster_state:ok" in redis(p, "CLUSTER", "INFO") and
                           owner(p, slot) not in (None, killed) for p in c1)
            except (OSError, RuntimeError):
                return False
        self.assertTrue(wait_until(failed_over, timeout=30), self.status())
        promoted = owner(c1[0], slot)
        # A new resource in the same slot (its hash tag), in a fresh process that starts from the
        # seeds (the first of c1's may be the dead master): c1's vote goes to the promoted master.
        a = self.run_cli("acquire", "{job}:after", "--ttl", "30s", "--json", env=env)
        self.assertEqual(a.returncode, 0, a.stdout + a.stderr)
        got = json.loads(a.stdout)
        # c1 may still be pending when two votes decided: its SET lands just after, or never (its
        # slot map, from seeds that include the dead master, came after the 50 ms node deadline:
        # seen under load). Where c1's vote goes is what status shows, and the "alone" case below
        # proves c1's SET reaches the promoted master.
        wait_until(lambda: redis(promoted, "GET", "{job}:after") == got["token"], timeout=5)
        on_promoted = redis(promoted, "GET", "{job}:after")
        self.assertIn(on_promoted, (got["token"], None))
        st = json.loads(self.ok(self.run_cli("status", "{job}:after", "--json", env=env)).stdout)
        self.assertEqual(st["per_node"][0]["value"], on_promoted)
        self.assertEqual(st["per_node"][0]["where"], "slot %d on 127.0.0.1:%d" % (slot, promoted))
        # c1 alone as the only vote: its yes is the quorum.
        alone = self.run_cli("acquire", "{job}:c1", "--ttl", "30s", env=clean_env(REDLOCK_NODES=votes[0]))
        self.assertEqual(alone.returncode, 0, alone.stdout + alone.stderr)
        self.assertEqual(redis(promoted, "GET", "{job}:c1"), alone.stdout.strip())
        self.ok(self.run_cli("release", "{job}:c1", alone.stdout.strip(), env=env))
        nodes = self.status()
        self.assertEqual(nodes[index - 1]["state"], "down")
        self.assertEqual(nodes[promoted - base]["role"], "master")
        self.assertTrue(any(a <= slot <= b for a, b in nodes[promoted - base]["slots"]), nodes)
        self.ok(self.run_cli("release", "{job}:after", got["token"], env=env))

        # Started again, the killed master rejoins as the promoted one's replica.
        r = self.ok(self.cluster("start", str(index)))
        self.assertIn("replica c1", r.stdout)
        nodes = self.status()
        self.assertEqual(nodes[index - 1]["role"], "replica")
        self.assertEqual(owner(killed, slot), promoted)
        pids = [n["pid"] for n in nodes]
        self.assert_down_leaves_nothing(pids, range(base, base + PROCS))
        self.assertEqual([n["state"] for n in self.status()], ["down"] * PROCS)

        # `up` again starts the same clusters from their nodes.conf (the killed master stays a
        # replica); the ids file says which ids they have.
        r = self.ok(self.cluster("up"))
        self.assertIn("node %d (127.0.0.1:%d, replica c1): started" % (index, killed), r.stdout)
        self.assertEqual(owner(base, slot), promoted)

    def test_tls(self):
        # --tls: TLS-only nodes whose cluster bus and replication are TLS too; the votes are
        # rediss+cluster:// addresses verified against the cluster's own CA.
        base = free_cluster_base(PER)
        r = self.ok(self.cluster("up", "--topology", "cluster", "--tls", "--count", "1",
                                 "--base-port", str(base)))
        self.assertEqual(r.stdout.count("started"), PER, r.stdout)
        self.assertIn("1 Redis Cluster (c1, 3 masters with 1 replica each", r.stdout)
        env = self.nodes_env()
        ca = os.path.join(self.dir, "tls", "ca.crt")
        self.assertEqual(env["REDLOCK_CACERT"], ca)
        self.assertEqual(env["REDLOCK_NODES"], "rediss+cluster://127.0.0.1:%d?" % base +
                         "&".join("seed=127.0.0.1:%d" % (base + k) for k in range(1, PER)))

        def tls(port, *args):
            c = TlsResp(port, ca)
            try:
                return c.command(*args)
            finally:
                c.close()
        for port in range(base, base + PER):
            self.assertFalse(pings(port, timeout=0.3), port)  # no plaintext listener
            self.assertEqual(tls(port, "CONFIG", "GET", "tls-cluster"), ["tls-cluster", "yes"])
            self.assertEqual(tls(port, "CONFIG", "GET", "tls-replication"), ["tls-replication", "yes"])
            self.assertIn("cluster_state:ok", tls(port, "CLUSTER", "INFO"))
        # The cluster announces the TLS ports (the only ones), and the replicas are linked.
        self.assertEqual(set(cluster_nodes(base, tls)), set(range(base, base + PER)))
        for port in range(base + 3, base + PER):
            self.assertIn("master_link_status:up", tls(port, "INFO", "replication"))

        a = self.run_cli("acquire", "tls-job", env=env)
        self.assertEqual(a.returncode, 0, a.stdout + a.stderr)
        st = json.loads(self.ok(self.run_cli("status", "tls-job", "--json", env=env)).stdout)
        slot = tls(base, "CLUSTER", "KEYSLOT", "tls-job")
        self.assertEqual(st["per_node"][0]["value"], a.stdout.strip())
        self.assertEqual(st["per_node"][0]["where"],
                         "slot %d on 127.0.0.1:%d" % (slot, owner(base, slot, tls)))
        # Without TLS the same vote gets nothing.
        plain = self.run_cli("acquire", "tls-job-2", "--retry-count", "0",
                             env=clean_env(REDLOCK_NODES=env["REDLOCK_NODES"].replace("rediss+", "redis+")))
        self.assertEqual(plain.returncode, 3, plain.stdout + plain.stderr)
        self.ok(self.run_cli("release", "tls-job", a.stdout.strip(), env=env))
        pids = [n["pid"] for n in self.status()]
        self.assert_down_leaves_nothing(pids, [])

    def test_refusals(self):
        base = free_cluster_base(PER)
        r = self.cluster("up", "--topology", "clustr", "--count", "1", "--base-port", str(base))
        self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
        self.assertIn("--topology clustr", r.stderr)
        self.assertIn("cluster", r.stderr.split("clustr", 1)[1])  # the values it takes
        for args, named in ((["--topology", "cluster", "--replicas", "9"], "--replicas 9"),
                            (["--topology", "cluster", "--replicas", "x"], "--replicas x"),
                            (["--topology", "sentinel", "--replicas", "1"], "--replicas 1")):
            r = self.cluster("up", "--count", "1", "--base-port", str(base), *args)
            self.assertEqual(r.returncode, 2, (args, r.stdout, r.stderr))
            self.assertIn(named, r.stderr)
        # The cluster bus of the last node must fit below 65536 too, and no bus port may be a
        # node's own; the offset is for the cluster topology only.
        for args, named in (
                (["--base-port", "55531"], "cluster buses of nodes 1..6 on ports 65531..65536, "
                                           "outside 1024..65535"),
                (["--base-port", str(base), "--bus-port-offset", "5"],
                 "on ports %d..%d, among the nodes' own ports" % (base + 5, base + 10)),
                (["--base-port", str(base), "--bus-port-offset", "-5"], "bus port offset -5"),
                (["--base-port", str(base), "--bus-port-offset", "x"], "--bus-port-offset x")):
            r = self.cluster("up", "--topology", "cluster", "--count", "1", *args)
            self.assertEqual(r.returncode, 2, (args, r.stdout, r.stderr))
            self.assertIn(named, r.stderr)
        r = self.cluster("up", "--count", "1", "--base-port", str(base), "--bus-port-offset", "100")
        self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
        self.assertIn("only with --topology cluster", r.stderr)
        self.assertFalse(any(f.endswith(".pid") for f in os.listdir(self.dir)))
        for port in range(base, base + PER):
            self.assertFalse(pings(port, timeout=0.2), port)

    def bus_ports(self, base, count):
        """{port: cluster bus port} of nodes base..base+count-1, as each node says of itself,
        checked against what the other nodes know of it."""
        views = {}
        for port in range(base, base + count):
            for line in redis(port, "CLUSTER", "NODES").splitlines():
                addr = line.split()[1].split(",")[0]  # ip:port@cport[,hostname]
                p, bus = addr.rsplit(":", 1)[1].split("@")
                views.setdefault(int(p), set()).add(int(bus))
        self.assertTrue(all(len(b) == 1 for b in views.values()), views)
        return {p: b.pop() for p, b in views.items()}

    def test_bus_ports_follow_the_offset_and_a_taken_one_is_replaced(self):
        # The user chooses where the buses go; one that is taken when its node starts is replaced
        # by a free port above the range (the trial lost nodes to "Address already in use"),
        # kept by the node, and known to the others: the cluster forms and takes locks.
        offset = 10000 + 100  # not Redis's own
        base = free_cluster_base(3)
        while base + 2 + offset >= 32768:  # below the ephemeral ports, as free_cluster_base's
            base = free_cluster_base(3)
        taken = base + 1 + offset
        with socket.socket() as blocker:
            blocker.bind(("127.0.0.1", taken))
            blocker.listen(1)
            r = self.ok(self.cluster("up", "--topology", "cluster", "--count", "1", "--replicas",
                                     "0", "--base-port", str(base), "--bus-port-offset",
                                     str(offset)))
            self.assertEqual(r.stdout.count("started"), 3, r.stdout)
            bus = self.bus_ports(base, 3)
        self.assertNotEqual(bus[base + 1], taken)
        self.assertGreater(bus[base + 1], base + 2 + offset)
        for port in (base, base + 2):
            # Where asked, unless something else took that one meanwhile.
            self.assertTrue(bus[port] == port + offset or bus[port] > base + 2 + offset, bus)
        with open(os.path.join(self.dir, "cluster.conf")) as f:
            self.assertIn("bus_port_offset=%d\n" % offset, f.read())
        env = self.nodes_env()
        a = self.ok(self.run_cli("acquire", "bus-job", env=env))
        self.ok(self.run_cli("release", "bus-job", a.stdout.strip(), env=env))
        # Started again with its preferred bus port free: it goes back there, and the others
        # learn it.
        self.ok(self.cluster("kill", "2"))
        self.ok(self.cluster("start", "2"))
        self.assertTrue(wait_until(lambda: self.bus_ports(base, 3)[base + 1] == taken, 10),
                        self.bus_ports(base, 3))
        # Another offset while it runs: refused, like the other settings.
        r = self.cluster("up", "--bus-port-offset", str(offset + 1))
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertIn("bus port offset %d, not %d" % (offset, offset + 1), r.stderr)

    def test_a_port_taken_after_the_check_is_picked_again(self):
        # The race of the trial: free when `up` checked, taken by the time the server binds. A
        # wrapper holds node 2's bus port and node 3's own port while their first start binds;
        # the bus port is replaced, the own port (the node's address) tried again. Each is held
        # until that node's log says the bind failed (at most 20 s), not for a fixed time: a
        # server that starts slowly (Valkey 9 loads its Lua module first, over a second under
        # load) would otherwise bind after the holder let go (seen in a run under stress). The
        # bus port stays taken 5 s longer, while its replacement is chosen.
        base = free_cluster_base(3)
        real = os.environ.get("REDLOCK_REDIS_SERVER") or shutil.which("redis-server")
        holder = ('import os, socket, sys, time\n'
                  's = socket.socket(); s.bind(("127.0.0.1", int(sys.argv[1]))); s.listen(1)\n'
                  'open(sys.argv[2], "w").close()\n'
                  'end = time.monotonic() + 20\n'
                  'def failed():\n'
                  '    try:\n'
                  '        with open(sys.argv[3]) as f: return "Address already in use" in f.read()\n'
                  '    except OSError: return False\n'
                  'while not failed() and time.monotonic() < end: time.sleep(0.01)\n'
                  'time.sleep(float(sys.argv[4]))\n')
        wrapper = os.path.join(self.dir, "racing-server")
        with open(wrapper, "w") as f:
            f.write('#!/bin/bash\n'
                    'port=$(sed -n "s/^port //p" "$1"); bus=$(sed -n "s/^cluster-port //p" "$1")\n'
                    'hold() {  # port log linger: until the log says the bind failed, + linger s\n'
                    '  [ -e "%(dir)s/held-$port" ] && return\n'
                    '  python3 -c \'%(holder)s\' "$1" "%(dir)s/held-$port" "$2" "$3" &\n'
                    '  while [ ! -e "%(dir)s/held-$port" ]; do sleep 0.01; done\n'
                    '}\n'
                    '[ "$port" = %(node2)d ] && hold "$bus" "%(dir)s/node-2.log" 5\n'
                    '[ "$port" = %(node3)d ] && hold "$port" "%(dir)s/node-3.log" 0\n'
                    'exec -a redis-server %(real)s "$@"\n'
                    % {"dir": self.dir, "holder": holder, "node2": base + 1, "node3": base + 2,
                       "real": real})
        os.chmod(wrapper, 0o755)
        env = clean_env(REDLOCK_REDIS_SERVER=wrapper)
        r = self.ok(self.cluster("up", "--topology", "cluster", "--count", "1", "--replicas", "0",
                                 "--base-port", str(base), env=env))
        bus = self.bus_ports(base, 3)
        self.assertNotEqual(bus[base + 1], base + 1 + 10000, bus)
        for node in (2, 3):
            with open(os.path.join(self.dir, "node-%d.log" % node)) as f:
                self.assertIn("Address already in use", f.read())  # the race did happen
        nodes = self.status()
        self.assertEqual([n["state"] for n in nodes], ["up"] * 3)
        self.assertEqual([n["pid"] for n in nodes],
                         [int(re.search(r"node %d .*pid (\d+)" % i, r.stdout).group(1))
                          for i in (1, 2, 3)])

    def test_help_names_the_topology(self):
        for args in (("cluster", "up", "--help"), ("demo", "--help")):
            r = subprocess.run([CLI, *args], capture_output=True, text=True, timeout=30)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertIn("standalone|sentinel|cluster", r.stdout)
        r = subprocess.run([CLI, "cluster", "up", "--help"], capture_output=True, text=True, timeout=30)
        self.assertIn("--replicas", r.stdout)


if __name__ == "__main__":
    unittest.main(verbosity=2)
