"""The ACL lines of docs/guide.md ("ACL for lock users"; issue 41 item 2), against real servers.

Each line is read from the guide itself, so the documentation and this test cannot drift apart.
For each feature a user is created on every node with exactly its line, and the feature runs
through redlock-cli as that user: it works (exit 0, no lock key left after release). Then the
same line minus one permission the guide says is needed makes the feature fail, which proves the
permission is needed."""
import json
import os
import re
import subprocess
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(__file__))
from redisfix import Server, query, wait_until, with_test_deadline  # noqa: E402

CLI = os.environ.get("REDLOCK_CLI", "redlock-cli")
GUIDE = os.path.join(os.path.dirname(__file__), "..", "..", "docs", "guide.md")
PREFIX = "lock:"  # the key prefix the guide's key patterns are written for


def guide_lines():
    """{user: [ACL SETUSER arguments]} from the guide's section "ACL for lock users"."""
    with open(GUIDE) as f:
        text = f.read()
    start = text.index("### ACL for lock users")
    end = text.index("\n## ", start)
    lines = {}
    # A line is a code span in a table cell, where '|' is written '\|'.
    for m in re.finditer(r"`(ACL SETUSER (\S+) (?:[^`\\]|\\.)*)`", text[start:end]):
        args = m.group(1).replace("\\|", "|").split()
        lines[m.group(2)] = args[3:]  # the rules after "ACL SETUSER <user>"
    return lines


def derived(key, role):
    return "{%s}:redlock:%s:%s" % (key, role, key)


def wake_channel(resource):
    key = PREFIX + resource
    return derived(key, "wake")


class AclLines(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.lines = guide_lines()
        cls.servers = [Server() for _ in range(3)]

    @classmethod
    def tearDownClass(cls):
        for s in cls.servers:
            s.close()

    # --- helpers ---

    def rules(self, user, without=()):
        """The guide's line of `user` with the permissions in `without` taken out (each must be in
        the line: a permission the guide no longer lists cannot be proved needed)."""
        self.assertIn(user, self.lines, "docs/guide.md has no ACL line for " + user)
        rules = list(self.lines[user])
        for perm in without:
            self.assertIn(perm, rules, "%s's line in docs/guide.md has no %s" % (user, perm))
            rules.remove(perm)
        return rules

    def make_user(self, name, rules):
        """Creates (or resets) `name` on every node with `rules` (the guide's line, maybe cut)."""
        for s in self.servers:
            self.assertEqual(query(s.port, "ACL", "SETUSER", name, *rules), b"OK")
        password = [r[1:] for r in rules if r.startswith(">")]
        return name, password[0]

    def user(self, line_user, without=()):
        """A user with `line_user`'s line minus `without`, under a name of its own."""
        name = line_user + "".join("-no" + re.sub(r"[^a-z]", "", p) for p in without)
        return self.make_user(name, self.rules(line_user, without))

    def cli_argv(self, who, *args):
        name, password = who
        nodes = ",".join("redis://%s:%s@%s" % (name, password, s.address) for s in self.servers)
        return with_test_deadline([CLI, "-n", nodes, "--key-prefix", PREFIX] + list(args))

    def cli(self, who, *args):
        r = subprocess.run(self.cli_argv(who, *args), capture_output=True, text=True, timeout=30)
        return r.returncode, r.stdout.strip(), r.stderr.strip()

    def ok(self, who, *args):
        code, out, err = self.cli(who, *args)
        self.assertEqual(code, 0, "%s as %s: exit %d: %s" % (args, who[0], code, err))
        return out

    def refused(self, who, *args, message=None, code=5):
        """The command fails as refused by the nodes' configuration (exit 5: an ACL refusal is not
        retried; `status` says its verdict "no quorum to tell" and exits 5 too),
        naming the refusal (or saying `message`)."""
        got, out, err = self.cli(who, *args)
        self.assertEqual(got, code, "%s as %s should be refused: %s %s" % (args, who[0], out, err))
        if message:
            self.assertIn(message, out + err)  # status says its verdict on stdout
        else:
            self.assertRegex(err, r"NOPERM|The user executing the script can't|ACL failure in script")

    def keys_left(self, *keys):
        """Those of `keys` that any node still has."""
        return sorted({k for s in self.servers for k in keys
                       if query(s.port, "EXISTS", k) == 1})

    def assert_gone(self, *resources, roles=()):
        keys = [PREFIX + r for r in resources]
        keys += [derived(PREFIX + r, role) for r in resources for role in roles]
        self.assertTrue(wait_until(lambda: not self.keys_left(*keys)),
                        "left behind: %s" % self.keys_left(*keys))

    def publishes(self):
        """PUBLISH calls the nodes served so far (scripts' calls included)."""
        n = 0
        for s in self.servers:
            stats = query(s.port, "INFO", "commandstats").decode()
            m = re.search(r"cmdstat_publish:calls=(\d+)", stats)
            n += int(m.group(1)) if m else 0
        return n

    def listeners(self, channel):
        return sum(query(s.port, "PUBSUB", "NUMSUB", channel)[1] for s in self.servers)

    # --- plain locks, several resources, the restart guard ---

    def test_plain(self):
        who = self.user("lock-plain")
        token = self.ok(who, "acquire", "plain")
        self.assertRegex(self.ok(who, "extend", "plain", token), r"^\d+$")
        # (Waited for: the CLI exits at the quorum decision, the third SET can land after.)
        self.assertTrue(wait_until(
            lambda: self.ok(who, "status", "plain").startswith("held on 3 of 3"), 10))
        self.ok(who, "release", "plain", token)
        self.assert_gone("plain", roles=("waiting",))

    def test_native(self):
        # Issue 43: the Lua-free line, on servers that have DELIFEQ (Valkey 9 in this suite).
        if query(self.servers[0].port, "COMMAND", "INFO", "DELIFEQ") in ([None], [], None):
            self.skipTest("this server has no DELIFEQ (Valkey >= 9 has)")
        who = self.user("lock-native")
        token = self.ok(who, "--commands", "native", "acquire", "native")
        self.assertRegex(self.ok(who, "--commands", "native", "extend", "native", token), r"^\d+$")
        self.ok(who, "--commands", "native", "release", "native", token)
        self.assert_gone("native")
        # Each permission the line lists is needed: without +delifeq the release is refused (exit
        # 5, commands=native: no script instead), without +set nothing is acquired.
        token = self.ok(who, "--commands", "native", "acquire", "native-2")
        self.refused(self.user("lock-native", ["+delifeq"]), "--commands", "native", "release",
                     "native-2", token, message="DELIFEQ")
        self.refused(self.user("lock-native", ["+set"]), "--commands", "native", "acquire", "n3")
        self.ok(who, "--commands", "native", "release", "native-2", token)
        self.assert_gone("native-2", "n3")

    def test_plain_needs_each_permission(self):
        self.refused(self.user("lock-plain", ["+info"]), "acquire", "p1",
                     message="the user needs +info")
        self.refused(self.user("lock-plain", ["+set"]), "acquire", "p2")
        full = self.user("lock-plain")
        token = self.ok(full, "acquire", "p3")
        self.refused(self.user("lock-plain", ["+pexpire"]), "extend", "p3", token)
        self.refused(self.user("lock-plain", ["+del"]), "release", "p3", token)
        # The release script also looks at the derived keys (is a waiter listening?).
        self.refused(self.user("lock-plain", ["~{*}:redlock:*:lock:*"]), "release", "p3", token)
        self.assertEqual(self.keys_left(PREFIX + "p3"), [PREFIX + "p3"])
        self.refused(self.user("lock-plain", ["+pttl"]), "status", "p3",
                     message="no quorum to tell")
        self.ok(full, "release", "p3", token)
        self.assert_gone("p1", "p2", "p3")

    def test_multi_resource(self):
        who = self.user("lock-plain")
        token = self.ok(who, "acquire", "m1", "m2")
        self.ok(who, "extend", "m1", "m2", token)
        self.ok(who, "release", "m1", "m2", token)
        self.assert_gone("m1", "m2")
        self.refused(self.user("lock-plain", ["+exists"]), "acquire", "m3", "m4")
        self.assert_gone("m3", "m4")

    def test_restart_guard(self):
        # The servers must be up longer than --min-uptime for the guard to let them vote.
        wait_until(lambda: all(b"uptime_in_seconds:0\r" not in query(s.port, "INFO", "server")
                               for s in self.servers), 3)
        who = self.user("lock-plain")
        token = self.ok(who, "acquire", "guarded", "--min-uptime", "1s")
        self.ok(who, "release", "guarded", token)
        self.assert_gone("guarded")
        # Without INFO the guard cannot see a restart: it fails closed and names the permission.
        self.refused(self.user("lock-plain", ["+info"]), "acquire", "guarded", "--min-uptime", "1s",
                     message="the user needs +info")
        self.assert_gone("guarded")

    # --- wake-ups ---

    def waiter(self, who, resource, retry_delay):
        return subprocess.Popen(self.cli_argv(who, "acquire", resource, "--wait", "20s",
                                              "--retry-delay", retry_delay),
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def test_wake_ups(self):
        who = self.user("lock-plain")
        holder = self.ok(who, "acquire", "woken")
        # Its retry delay is far longer than the wait for the wake-up below.
        waiter = self.waiter(who, "woken", "8s")
        try:
            # Subscribed under this user (SUBSCRIBE and the channel patterns are allowed).
            self.assertTrue(wait_until(lambda: self.listeners(wake_channel("woken")) == 3, 10),
                            "the waiter never subscribed on every node")
            before = self.publishes()
            released = time.monotonic()
            self.ok(who, "release", "woken", holder)
            out, err = waiter.communicate(timeout=30)
            woke_after = time.monotonic() - released
        finally:
            if waiter.poll() is None:
                waiter.kill()
                waiter.wait()
        self.assertEqual(waiter.returncode, 0, err)
        # The release's script published (PUBLISH inside a script is allowed)...
        self.assertGreater(self.publishes(), before)
        # ... and that woke the waiter, not its next poll 8 s (+-jitter) after its first attempt.
        self.assertLess(woke_after, 6.0)
        self.ok(who, "release", "woken", out.strip())
        self.assert_gone("woken")

    def test_wake_ups_need_subscribe(self):
        full = self.user("lock-plain")
        holder = self.ok(full, "acquire", "deaf")
        waiter = self.waiter(self.user("lock-plain", ["+subscribe"]), "deaf", "1s")
        try:
            # Its first attempt failed and it waits; no subscription went through.
            self.assertTrue(wait_until(lambda: query(self.servers[0].port, "EXISTS",
                                                     derived(PREFIX + "deaf", "waiting")) == 1
                                       or waiter.poll() is not None, 10))
            time.sleep(0.3)
            self.assertEqual(self.listeners(wake_channel("deaf")), 0)
            self.ok(full, "release", "deaf", holder)
            # It still gets the lock, by polling.
            out, err = waiter.communicate(timeout=30)
        finally:
            if waiter.poll() is None:
                waiter.kill()
                waiter.wait()
        self.assertEqual(waiter.returncode, 0, err)
        self.ok(full, "release", "deaf", out.strip())
        self.assert_gone("deaf")

    # --- fencing, fair, read-write ---

    def test_fence(self):
        who = self.user("lock-fence")
        got = json.loads(self.ok(who, "acquire", "fenced", "--fence", "--json"))
        self.assertGreater(int(got["fence"]), 0)
        self.ok(who, "extend", "fenced", got["token"])
        self.ok(who, "release", "fenced", got["token"])
        self.assert_gone("fenced")
        self.refused(self.user("lock-fence", ["+incr"]), "acquire", "fenced2", "--fence")
        self.assert_gone("fenced2")
        # The plain line is not enough.
        self.refused(self.user("lock-plain"), "acquire", "fenced3", "--fence")

    def test_fair(self):
        who = self.user("lock-fair")
        first = self.ok(who, "acquire", "queue", "--fair")
        # A second waiter in the queue: the release hands the lock over to it.
        waiter = subprocess.Popen(self.cli_argv(who, "acquire", "queue", "--fair", "--wait", "20s"),
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            self.assertTrue(wait_until(lambda: query(self.servers[0].port, "EXISTS",
                                                     derived(PREFIX + "queue", "queue")) == 1, 10))
            # (Waited for: under load the first acquire's third SET, or a status read of a node,
            # can come after the quorum that decided; seen once on Valkey in a full run.)
            self.assertTrue(wait_until(
                lambda: self.ok(who, "status", "queue").startswith("held on 3 of 3"), 10))
            self.ok(who, "release", "queue", first)
            out, err = waiter.communicate(timeout=30)
        finally:
            if waiter.poll() is None:
                waiter.kill()
                waiter.wait()
        self.assertEqual(waiter.returncode, 0, err)
        self.ok(who, "extend", "queue", out.strip())
        self.ok(who, "release", "queue", out.strip())
        self.assert_gone("queue", roles=("queue",))
        for perm in ["+incr", "+hset", "+hget", "+zrank"]:
            with self.subTest(without=perm):
                self.refused(self.user("lock-fair", [perm]), "acquire", "q2", "--fair")
                self.assert_gone("q2")
        # +hdel is not among them: the scripts drop a waiter's registered token with it when the
        # waiter wins, leaves or is found dead, and no CLI flow fails without it (the guide says
        # why it is in the line all the same).
        self.refused(self.user("lock-plain"), "acquire", "q3", "--fair")

    def test_read_write(self):
        who = self.user("lock-rw")
        readers = [self.ok(who, "acquire", "shared", "--read") for _ in range(2)]
        self.ok(who, "extend", "shared", "--read", readers[0])
        self.assertEqual(self.cli(who, "acquire", "shared", "--write")[0], 1)
        for r in readers:
            self.ok(who, "release", "shared", "--read", r)
        writer = self.ok(who, "acquire", "shared", "--write")
        self.ok(who, "extend", "shared", writer)
        self.ok(who, "release", "shared", writer)
        self.assert_gone("shared", roles=("readers", "writer"))
        for perm in ["+zremrangebyscore", "+pexpireat"]:
            with self.subTest(without=perm):
                self.refused(self.user("lock-rw", [perm]), "acquire", "shared2", "--read")
                self.assert_gone("shared2", roles=("readers",))
        self.refused(self.user("lock-plain"), "acquire", "shared3", "--read")

    # --- status ---

    def test_status(self):
        who = self.user("lock-status")
        locker = self.user("lock-rw")
        token = self.ok(locker, "acquire", "watched")
        # (Waited for: the CLI exits at the quorum decision, the third SET can land after.)
        self.assertTrue(wait_until(
            lambda: self.ok(who, "status", "watched").startswith("held on 3 of 3"), 10))
        # A monitoring user takes no lock.
        self.refused(who, "acquire", "watched2")
        for perm in ["+type", "+get", "+pttl", "+time", "+pubsub|numsub", "+evalsha"]:
            with self.subTest(without=perm):
                # Without PUBSUB NUMSUB the script's pcall leaves a hole in its reply, which no
                # longer names the refusal ("unexpected reply"): no quorum to tell, exit 3.
                self.refused(self.user("lock-status", [perm]), "status", "watched",
                             message="no quorum to tell", code=3 if perm == "+pubsub|numsub" else 5)
        self.ok(locker, "release", "watched", token)
        # A read lock's readers are counted and listed.
        reader = self.ok(locker, "acquire", "watched", "--read")
        code, out, err = self.cli(who, "status", "watched")
        self.assertEqual(code, 0, err)
        for perm in ["+zcount", "+zrangebyscore"]:
            with self.subTest(without=perm):
                self.refused(self.user("lock-status", [perm]), "status", "watched",
                             message="no quorum to tell")
        self.ok(locker, "release", "watched", "--read", reader)
        self.assert_gone("watched", "watched2", roles=("readers",))


if __name__ == "__main__":
    unittest.main(verbosity=2)
