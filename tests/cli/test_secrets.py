"""redlock-cli and passwords (docs/cli.md, "Nodes"; issue 40 item 8): a password reaches the nodes
percent-encoded in a URL, from --password-file, REDLOCK_PASSWORD_FILE or REDLOCK_PASSWORD; no
output shows it or a piece of it; the job of `run` gets none in its environment.

The servers require a password with every character that has a meaning in an address."""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest
import urllib.parse

sys.path.insert(0, os.path.dirname(__file__))
from redisfix import Server, query, with_test_deadline  # noqa: E402

CLI = os.environ.get("REDLOCK_CLI", "redlock-cli")

# Every piece between the separators is distinctive (upper case never appears in a token).
PASSWORD = "AAKX,BBQZ@CCJW:DDYV/EEPU%FFRT"
ENCODED = urllib.parse.quote(PASSWORD, safe="")  # AAKX%2CBBQZ%40CCJW%3ADDYV%2FEEPU%25FFRT
WRONG = "GGHM,JJNW"  # a wrong password must not show either
PIECES = re.split(r"[,@:/%]", PASSWORD + "," + WRONG)


def variables(env=None):
    e = {k: v for k, v in os.environ.items()
         if k not in ("REDLOCK_NODES", "REDLOCK_MIN_UPTIME", "REDLOCK_PASSWORD",
                      "REDLOCK_PASSWORD_FILE")}
    e.update(env or {})
    return e


class Secrets(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.servers = [Server() for _ in range(3)]
        for s in cls.servers:
            assert query(s.port, "CONFIG", "SET", "requirepass", PASSWORD) == b"OK"
        cls.plain = ",".join(s.address for s in cls.servers)
        cls.encoded = ",".join("redis://default:%s@%s" % (ENCODED, s.address) for s in cls.servers)
        cls.user_only = ",".join("redis://default:@%s" % s.address for s in cls.servers)
        cls.dir = tempfile.mkdtemp(prefix="redlock-cli-secrets-")
        cls.file = cls.write("password", PASSWORD + "\n")
        cls.wrong_file = cls.write("wrong", WRONG + "\r\n")

    @classmethod
    def tearDownClass(cls):
        for s in cls.servers:
            s.close()
        shutil.rmtree(cls.dir, ignore_errors=True)

    @classmethod
    def write(cls, name, text):
        path = os.path.join(cls.dir, name)
        with open(path, "w") as f:
            f.write(text)
        os.chmod(path, 0o600)
        return path

    def cli(self, *args, nodes=None, env=None, timeout=30):
        argv = [CLI] + (["-n", nodes] if nodes is not None else []) + list(args)
        r = subprocess.run(with_test_deadline(argv), capture_output=True, env=variables(env),
                           timeout=timeout)
        self.assertNoPassword(r)
        return r

    def assertNoPassword(self, r):
        out = r.stdout + r.stderr
        for piece in PIECES:
            self.assertNotIn(piece.encode(), out, (r.args, out.decode(errors="replace")))

    def held(self, resource, token):
        """On how many servers `resource` holds `token`."""
        return sum(query(s.port, "GET", resource, password=PASSWORD) == token.encode()
                   for s in self.servers)

    def cycle(self, resource, **kw):
        """acquire (--json, -v), status, extend and release with the same nodes and password."""
        r = self.cli("-v", "--json", "acquire", resource, **kw)
        self.assertEqual(r.returncode, 0, r.stderr)
        token = json.loads(r.stdout)["token"]
        self.assertEqual(self.held(resource, token), 3)
        for args in (["status", resource], ["-v", "--json", "status", resource],
                     ["-v", "extend", resource, token, "--ttl", "20s"]):
            r = self.cli(*args, **kw)
            self.assertEqual(r.returncode, 0, (args, r.stderr))
        r = self.cli("-v", "--json", "release", resource, token, **kw)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(self.held(resource, token), 0)

    def test_a_percent_encoded_password_with_a_comma_works(self):
        self.cycle("s-encoded", nodes=self.encoded)

    def test_password_file_and_variables(self):
        for name, nodes, env, extra in (
                ("s-flag", self.plain, {}, ["--password-file", self.file]),
                ("s-file-var", self.plain, {"REDLOCK_PASSWORD_FILE": self.file}, []),
                ("s-var", self.plain, {"REDLOCK_PASSWORD": PASSWORD}, []),
                ("s-user", self.user_only, {"REDLOCK_PASSWORD_FILE": self.file}, []),
                ("s-nodes-var", None, {"REDLOCK_NODES": self.user_only,
                                       "REDLOCK_PASSWORD": PASSWORD}, []),
                # The flag wins over its variable.
                ("s-flag-wins", self.plain, {"REDLOCK_PASSWORD_FILE": self.wrong_file},
                 ["--password-file", self.file])):
            with self.subTest(name):
                r = self.cli(*extra, "acquire", name, nodes=nodes, env=env)
                self.assertEqual(r.returncode, 0, r.stderr)
                self.assertEqual(self.held(name, r.stdout.decode().strip()), 3)
                r = self.cli(*extra, "release", name, r.stdout.decode().strip(), nodes=nodes, env=env)
                self.assertEqual(r.returncode, 0, r.stderr)

    def test_no_output_shows_a_wrong_password_or_a_piece_of_one(self):
        wrong = ",".join("redis://default:%s@%s" % (urllib.parse.quote(WRONG, safe=""), s.address)
                         for s in self.servers)
        for nodes, extra in ((self.plain, ["--password-file", self.wrong_file]), (wrong, [])):
            for args in (["acquire", "s-wrong", "--retry-count", "0"],
                         ["-v", "acquire", "s-wrong", "--retry-count", "0"],
                         ["--json", "-v", "acquire", "s-wrong", "--retry-count", "0"],
                         ["-v", "status", "s-wrong"], ["--json", "status", "s-wrong"],
                         ["-v", "release", "s-wrong", "0" * 40],
                         ["-v", "run", "s-wrong", "--retry-count", "0", "--", "true"]):
                with self.subTest(nodes=nodes[:20], args=args):
                    r = self.cli(*extra, *args, nodes=nodes)
                    self.assertNotEqual(r.returncode, 2, r.stderr)
                    if "status" not in args:  # (status says what it saw, with exit 0)
                        self.assertNotEqual(r.returncode, 0, r.stderr)
                    self.assertIn(b"WRONGPASS", r.stdout + r.stderr)

    def test_a_raw_comma_in_the_url_is_refused_without_a_piece_of_the_password(self):
        # Written raw, the ',' would end the node: refused before anything is sent, with a
        # message that says how to write it and shows no part of the credentials.
        raw = "redis://default:AAKX,BBQZ@%s" % self.servers[0].address
        for args in (["acquire", "s-raw"], ["-v", "--json", "acquire", "s-raw"], ["status", "s-raw"]):
            r = self.cli(*args, nodes=raw + "," + self.plain)
            self.assertEqual(r.returncode, 2, r.stderr)
            self.assertIn(b"must be written %2C", r.stderr)
            self.assertIn(b"'redis://***@" + self.servers[0].address.encode() + b"'", r.stderr)
        r = self.cli("acquire", "s-raw", nodes=raw, env={"REDLOCK_NODES": raw})
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertFalse(any(query(s.port, "EXISTS", "s-raw", password=PASSWORD)
                             for s in self.servers))

    def test_bad_password_sources_are_usage_errors_naming_them(self):
        empty = self.write("empty", "\n")
        two = self.write("two-lines", "AAKX\nBBQZ\n")
        missing = os.path.join(self.dir, "missing")
        cases = [
            (["--password-file", missing], {}, missing.encode() + b": No such file"),
            (["--password-file", empty], {}, empty.encode() + b": empty"),
            (["--password-file", two], {}, two.encode() + b": more than one line"),
            ([], {"REDLOCK_PASSWORD_FILE": missing}, b"REDLOCK_PASSWORD_FILE: " + missing.encode()),
            ([], {"REDLOCK_PASSWORD_FILE": self.file, "REDLOCK_PASSWORD": PASSWORD},
             b"REDLOCK_PASSWORD and REDLOCK_PASSWORD_FILE are both set"),
        ]
        for extra, env, needle in cases:
            with self.subTest(extra=extra, env=sorted(env)):
                r = self.cli(*extra, "acquire", "s-bad", nodes=self.plain, env=env)
                self.assertEqual(r.returncode, 2, r.stderr)
                self.assertIn(needle, r.stderr)
        # A user named without a password, and none given otherwise.
        r = self.cli("acquire", "s-bad", nodes=self.user_only)
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn(b"names the user 'default' but no password", r.stderr)
        self.assertIn(b"--password-file", r.stderr)
        self.assertFalse(any(query(s.port, "EXISTS", "s-bad", password=PASSWORD)
                             for s in self.servers))

    def test_the_job_of_run_gets_no_password(self):
        # REDLOCK_PASSWORD is dropped; REDLOCK_NODES keeps its nodes with the passwords taken out
        # (the user stays), so the job names the same nodes and never the local default ones;
        # REDLOCK_PASSWORD_FILE, a path, is passed on.
        stripped = self.user_only
        env = {"REDLOCK_NODES": self.encoded, "REDLOCK_PASSWORD": WRONG}
        r = self.cli("run", "s-job", "--", "env", env=env)
        self.assertEqual(r.returncode, 0, r.stderr)
        job_env = dict(line.split("=", 1) for line in r.stdout.decode().splitlines() if "=" in line)
        self.assertNotIn("REDLOCK_PASSWORD", job_env)
        self.assertEqual(job_env["REDLOCK_NODES"], stripped)
        self.assertRegex(job_env["REDLOCK_TOKEN"], r"^[0-9a-f]{40}$")
        # A variable that -n overrides and that does not parse (here a raw ',' in a password) is
        # dropped: its pieces cannot be told apart.
        r = self.cli("run", "s-job", "--", "env", nodes=self.plain,
                     env={"REDLOCK_NODES": "redis://default:AAKX,BBQZ@127.0.0.1:1",
                          "REDLOCK_PASSWORD": PASSWORD})
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertNotIn(b"REDLOCK_NODES=", r.stdout)
        self.assertNotIn(b"AAKX", r.stdout)
        self.assertNotIn(b"BBQZ", r.stdout)
        # A redlock-cli in the job reaches the same nodes with the password file...
        nested = with_test_deadline([CLI, "--json", "status", "s-job"])
        r = self.cli("run", "s-job", "--", *nested,
                     env={"REDLOCK_NODES": self.encoded, "REDLOCK_PASSWORD_FILE": self.file})
        self.assertEqual(r.returncode, 0, r.stderr)
        status = json.loads(r.stdout)
        self.assertEqual([n["node"] for n in status["per_node"]], [s.address for s in self.servers])
        values = {n["value"] for n in status["per_node"]}
        self.assertEqual(len(values), 1, status)
        self.assertRegex(values.pop(), r"^[0-9a-f]{40}$")  # the job's own lock, on every node
        # ... and without it, refuses, naming what is missing (not the default nodes).
        r = self.cli("run", "s-job", "--", *nested, env={"REDLOCK_NODES": self.encoded})
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn(b"names the user 'default' but no password", r.stderr)
        self.assertNotIn(b"7001", r.stdout + r.stderr)


if __name__ == "__main__":
    unittest.main(verbosity=2)
