"""The man page's JSON OUTPUT section against real output.

The section lists, for each lock command, the fields of its --json object, the fields of the
per-node records, and the node states. This test reads those lists from docs/redlock-cli.1 (the
`.B name` that follows each `.TP` of a subsection) and runs the commands against real
redis-server processes in situations that bring out every field and every state: each documented
name must show up, and nothing must show up that is not documented.
"""
import json
import os
import re
import shutil
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(__file__))
from redisfix import Cluster, Server, command, free_cluster_base, free_port, with_test_deadline  # noqa: E402

import subprocess  # noqa: E402

CLI = os.environ.get("REDLOCK_CLI", "redlock-cli")
HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.environ.get("REDLOCK_SOURCE_ROOT", os.path.join(HERE, "..", ".."))
MAN = os.path.join(SOURCE, "docs", "redlock-cli.1")


def documented():
    """{subsection title: [names]} of the man page's JSON OUTPUT section."""
    with open(MAN) as f:
        text = f.read()
    m = re.search(r"(?ms)^\.SH JSON OUTPUT\n(.*?)^\.SH ", text)
    assert m, "the man page has no JSON OUTPUT section"
    sections = {}
    for part in re.split(r"(?m)^\.SS ", m.group(1))[1:]:
        title, _, body = part.partition("\n")
        title = title.strip('"').replace("\\-", "-")
        names = re.findall(r"(?m)^\.TP\n\.B (\S+)$", body)
        sections[title] = [n.replace("\\-", "-") for n in names]
    return sections


class JsonDocs(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.docs = documented()
        cls.c = Cluster(3)
        cls.dead = "127.0.0.1:%d" % free_port()  # nothing listens there: "down"
        cls.keys = {c: set() for c in ("acquire", "release", "extend", "status")}
        cls.record_keys = {"lock": set(), "status": set()}
        cls.states = set()
        try:
            cls.observe()
        except BaseException:
            cls.c.close()
            raise

    @classmethod
    def tearDownClass(cls):
        cls.c.close()

    @classmethod
    def cli(cls, *args, nodes=None):
        env = {k: v for k, v in os.environ.items() if not k.startswith("REDLOCK_")}
        r = subprocess.run(with_test_deadline([CLI, "-n", nodes or cls.c.nodes, "--json", "--retry-count", "0"] + list(args)),
                           capture_output=True, env=env, timeout=30)
        obj = json.loads(r.stdout)
        cmd = next(a for a in args if a in cls.keys)
        cls.keys[cmd] |= set(obj)
        for rec in obj["per_node"]:
            cls.record_keys["status" if cmd == "status" else "lock"] |= set(rec)
            if "state" in rec:
                cls.states.add(rec["state"])
        return obj

    @classmethod
    def observe(cls):
        c, servers = cls.c, cls.c.servers
        with_dead = c.nodes + "," + cls.dead
        # ok, fence; then held-by-other, error and message. (The dead node may be "pending" in an
        # acquisition decided before its connect failed; release and extend wait for it: "down".)
        a = cls.cli("acquire", "jd-a", "--fence", nodes=with_dead)
        assert "token" in a, a
        cls.cli("acquire", "jd-a", nodes=with_dead)
        # not-held (release and extend of a token nobody holds), then ok.
        cls.cli("release", "jd-a", "0" * 40, nodes=with_dead)
        cls.cli("extend", "jd-a", "0" * 40, nodes=with_dead)
        cls.cli("extend", "jd-a", a["token"], nodes=with_dead)
        cls.cli("release", "jd-a", a["token"], nodes=with_dead)
        # error: every node a read-only replica (of a master that does not exist), so each SET
        # is answered READONLY; the outcome is decided after two such answers, so at least two
        # say it whatever their order. (Not a key of the lock's layout: that is the library's.)
        dead_port = free_port()
        try:
            for s in servers:
                command(s.port, "REPLICAOF", "127.0.0.1", str(dead_port))
            cls.cli("acquire", "jd-e")
        finally:
            for s in servers:
                command(s.port, "REPLICAOF", "NO", "ONE")
        # excluded: every node is younger than the restart guard's minimum uptime.
        cls.cli("--min-uptime", "1h", "acquire", "jd-x")
        # pending (a paused node after the quorum decided) and timeout (release waits for it).
        servers[2].stop()
        try:
            p = cls.cli("--node-timeout", "1s", "acquire", "jd-p")
            cls.cli("--node-timeout", "1s", "release", "jd-p", p["token"])
        finally:
            servers[2].cont()
        # auth-failed: a node that refuses the password (release waits for every node).
        guarded = Server()
        try:
            command(guarded.port, "CONFIG", "SET", "requirepass", "right")
            cls.cli("release", "jd-auth", "0" * 40,
                    nodes=c.nodes + ",redis://:wrong@127.0.0.1:%d" % guarded.port)
        finally:
            guarded.close()
        # status: a key, no key, a node down.
        s = cls.cli("acquire", "jd-s")
        cls.cli("status", "jd-s", nodes=with_dead)
        cls.cli("release", "jd-s", s["token"])
        # where: a Redis Cluster vote (one cluster of three masters that `cluster up --topology
        # cluster` starts) names the master that serves the key's slot.
        cdir = tempfile.mkdtemp(prefix="redlock-json-docs-")
        base = free_cluster_base(3)
        cluster = [CLI, "cluster", "--dir", cdir]
        env = {k: v for k, v in os.environ.items()
               if not k.startswith("REDLOCK_") or k == "REDLOCK_REDIS_SERVER"}
        try:
            up = subprocess.run(cluster[:2] + ["up", "--topology", "cluster", "--count", "1",
                                               "--replicas", "0", "--base-port", str(base)] + cluster[2:],
                                capture_output=True, text=True, timeout=60, env=env)
            assert up.returncode == 0, up.stdout + up.stderr
            vote = "redis+cluster://127.0.0.1:%d?seed=127.0.0.1:%d&seed=127.0.0.1:%d" % (base, base + 1, base + 2)
            w = cls.cli("acquire", "jd-w", nodes=vote)
            cls.cli("status", "jd-w", nodes=vote)
            cls.cli("release", "jd-w", w["token"], nodes=vote)
        finally:
            subprocess.run(cluster[:2] + ["down"] + cluster[2:], capture_output=True, timeout=60, env=env)
            shutil.rmtree(cdir, ignore_errors=True)

    def check(self, observed, title):
        self.assertIn(title, self.docs, "no subsection %r in JSON OUTPUT" % title)
        doc = self.docs[title]
        self.assertEqual(len(doc), len(set(doc)), "%s: a name is listed twice" % title)
        self.assertEqual(sorted(observed - set(doc)), [], "%s: in the output, not in the man page" % title)
        self.assertEqual(sorted(set(doc) - observed), [], "%s: in the man page, never in the output" % title)

    def test_fields_of_each_command(self):
        for cmd in ("acquire", "release", "extend", "status"):
            self.check(self.keys[cmd], cmd + " --json")

    def test_fields_of_the_per_node_records(self):
        self.check(self.record_keys["lock"], "per_node records of acquire, release and extend")
        self.check(self.record_keys["status"], "per_node records of status")

    def test_node_states(self):
        self.check(self.states, "Node states")

    def test_nodes_is_a_count_everywhere(self):
        for cmd in ("acquire", "release", "extend", "status"):
            obj = self.cli(*{"acquire": ["acquire", "jd-n"], "release": ["release", "jd-n", "0" * 40],
                             "extend": ["extend", "jd-n", "0" * 40], "status": ["status", "jd-n"]}[cmd])
            self.assertEqual(obj["nodes"], 3, cmd)
            self.assertEqual(len(obj["per_node"]), 3, cmd)


if __name__ == "__main__":
    unittest.main(verbosity=2)
