"""redlock-cli bench: a smoke test of the benchmark's output. Never asserts speed (testing.md)."""
import json
import os
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.dirname(__file__))
from redisfix import Cluster, command, with_test_deadline  # noqa: E402

CLI = os.environ.get("REDLOCK_CLI", "redlock-cli")


def run(*args, nodes, timeout=120):
    e = dict(os.environ)
    e.pop("REDLOCK_NODES", None)
    e.pop("REDLOCK_MIN_UPTIME", None)
    # A generous node deadline of its own (with_test_deadline keeps an explicit one): the tests
    # assert no errors over a second of locks in flight, which a loaded machine can stretch.
    return subprocess.run(with_test_deadline([CLI, "--node-timeout", "2s", "-n", nodes] + list(args)),
                          capture_output=True, env=e, timeout=timeout)


def dbsize(port):
    r = command(port, "DBSIZE")
    return int(r.strip()[1:])


class Bench(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.c = Cluster(3)

    @classmethod
    def tearDownClass(cls):
        cls.c.close()

    def assert_no_keys(self):
        for s in self.c.servers:
            self.assertEqual(dbsize(s.port), 0, "keys left on %s" % s.address)

    def test_json_fields_are_sane(self):
        r = run("bench", "--seconds", "1", "--concurrency", "4", "--json", nodes=self.c.nodes)
        self.assertEqual(r.returncode, 0, r.stderr)
        obj = json.loads(r.stdout)
        self.assertEqual(obj["nodes"], 3)
        self.assertEqual(obj["quorum"], 2)
        self.assertEqual(obj["concurrency"], 4)
        for field in ("rtt_us_p50", "cycle_us_p50", "cycle_us_p99", "cycle_us_p999",
                      "cycles_per_s", "cpu_us_per_cycle", "sequential_cpu_us_per_cycle",
                      "acquire_us_p50", "release_us_p50", "fanout_quorum_us_p50",
                      "fanout_all_us_p50", "raw_cycle_us_p50", "raw_cycle_samples",
                      "cycle_to_raw_cycle"):
            self.assertIn(field, obj)
            self.assertGreater(obj[field], 0, field)
        self.assertGreaterEqual(obj["cycle_us_p99"], obj["cycle_us_p50"])
        self.assertGreaterEqual(obj["cycle_us_p999"], obj["cycle_us_p99"])
        self.assertGreaterEqual(obj["rtt_us_p99"], obj["rtt_us_p50"])
        self.assertGreater(obj["cycles"], 0)
        self.assertEqual(len(obj["throughput"]), 1)
        level = obj["throughput"][0]
        self.assertEqual(level["concurrency"], 4)
        self.assertGreater(level["cycles"], 0)
        self.assertGreaterEqual(level["cycle_us_p99"], level["cycle_us_p50"])
        self.assertEqual(obj["errors"], 0, obj.get("first_error"))
        self.assertEqual(obj["keys_left"], 0)
        self.assertEqual(obj["unchecked_nodes"], 0)
        # Progress lines go to a terminal only; a pipe gets none.
        self.assertNotIn(b"\r", r.stderr)
        self.assert_no_keys()

    def test_human_table(self):
        r = run("bench", "--seconds", "0.3", "--concurrency", "2", nodes=self.c.nodes)
        self.assertEqual(r.returncode, 0, r.stderr)
        out = r.stdout.decode()
        for needle in ("SET rtt", "SET fan-out", "raw cycle (3)", "x raw cycle", "cycle sequential",
                       "cycle C=2", "keys left: 0"):
            self.assertIn(needle, out)
        self.assert_no_keys()

    def test_hold_mode(self):
        r = run("bench", "--hold", "20", "--soak", "0.5", "--ttl", "3s", "--json", nodes=self.c.nodes)
        self.assertEqual(r.returncode, 0, r.stderr)
        obj = json.loads(r.stdout)
        self.assertEqual(obj["locks"], 20)
        self.assertEqual(obj["failed"], 0)
        self.assertEqual(obj["lost"], 0)
        self.assertGreater(obj["rss_mb_locked"], 0)
        self.assertGreaterEqual(len(obj["samples"]), 2)
        self.assertEqual(obj["keys_left"], 0)
        self.assert_no_keys()

    def test_handoff_mode(self):
        r = run("bench", "--handoff", "2", "--seconds", "0.5", "--json", nodes=self.c.nodes)
        self.assertEqual(r.returncode, 0, r.stderr)
        obj = json.loads(r.stdout)
        self.assertEqual(obj["mode"], "handoff")
        rows = {(x["kind"], x["wake_ups"]): x for x in obj["runs"]}
        self.assertEqual(set(rows), {("plain", False), ("plain", True), ("fair", False), ("fair", True),
                                     ("signalled", False)})
        # The floor's clients take turns: every handoff goes to another client.
        floor = rows[("signalled", False)]
        self.assertGreater(floor["handoffs_to_other"], 0, floor)
        self.assertEqual(floor["to_other_pct"], 100.0, floor)
        self.assertEqual((floor["gap_us_p50"], floor["gap_us_p99"]),
                         (floor["gap_other_us_p50"], floor["gap_other_us_p99"]), floor)
        for x in obj["runs"]:
            self.assertEqual(x["waiters"], 2)
            self.assertGreater(x["handoffs_per_s"], 0, x)
            self.assertTrue(0 <= x["to_other_pct"] <= 100, x)
            self.assertEqual(x["errors"], 0, x)
            # What the nodes did per handoff: at least a SET and a release on each of a quorum.
            quorum = len(self.c.nodes.split(",")) // 2 + 1
            self.assertGreaterEqual(x["server_commands"], 2 * quorum, x)
            self.assertGreaterEqual(x["server_cpu_us"], 0, x)
        # A fair handoff takes a ticket and confirms the handoff with an attempt, in scripts: the
        # nodes do more for it than for the floor's SET and release.
        self.assertGreater(rows[("fair", True)]["server_commands"], floor["server_commands"])
        self.assertGreater(obj["rtt_us_p50"], 0)
        # The round (a SET to every node until a quorum answered) was measured, and its key is gone.
        self.assertGreater(obj["round_us_p50"], 0)
        self.assert_no_keys()

    def test_usage_errors(self):
        for args, needle in [(["--seconds", "0"], b"--seconds"),
                             (["--concurrency", "0"], b"--concurrency"),
                             (["--ttl", "0"], b"--ttl"),
                             (["--soak", "5"], b"--hold"),
                             (["--hold", "3", "--concurrency", "2"], b"--concurrency"),
                             (["--handoff", "2,x"], b"'x'"),
                             (["--handoff", "0"], b"--handoff")]:
            r = run("bench", *args, nodes=self.c.nodes)
            self.assertEqual(r.returncode, 2, (args, r.stderr))
            self.assertIn(needle, r.stderr)

    def test_no_quorum_exits_3(self):
        r = run("bench", "--seconds", "0.3", "--concurrency", "1", "--json",
                nodes="127.0.0.1:1,127.0.0.1:2,127.0.0.1:3")
        self.assertEqual(r.returncode, 3, r.stderr)
        obj = json.loads(r.stdout)
        self.assertGreater(obj["errors"], 0)


if __name__ == "__main__":
    unittest.main()
