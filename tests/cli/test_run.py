"""redlock-cli run: flock(1) across machines (docs/cli.md)."""
import os
import pty
import select
import signal
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(__file__))
from redisfix import Cluster, command, get, wait_until, with_test_deadline  # noqa: E402

CLI = os.environ.get("REDLOCK_CLI", "redlock-cli")
CLI_ARGV = with_test_deadline([CLI])  # the program and the tests' node deadline


# A job whose own child keeps working in the background: the grandchild of `run` appends a line
# to OUT every 20 ms and records its pid in PID (so that the test can clean up after a failure,
# by that pid and only if it is still that loop). The script then waits for it, or with EXIT=N
# exits N after 0.3 s, leaving it behind. With IGNORE_TERM=1 both ignore SIGTERM.
GRANDCHILD_JOB = (
    'if [ -n "$IGNORE_TERM" ]; then trap "" TERM; fi; '
    'sh -c \'if [ -n "$IGNORE_TERM" ]; then trap "" TERM; fi; echo $$ > "$PID"; '
    'while :; do echo x >> "$OUT"; sleep 0.02; done\' & '
    'if [ -n "$EXIT" ]; then sleep 0.3; exit "$EXIT"; fi; wait')


class Grandchild:
    """The files of a GRANDCHILD_JOB, and whether its loop still writes."""

    def __init__(self, d):
        self.out = os.path.join(d, "out")
        self.pidfile = os.path.join(d, "pid")

    def env(self, base, exit_code=None, ignore_term=False):
        e = dict(base, OUT=self.out, PID=self.pidfile)
        if exit_code is not None:
            e["EXIT"] = str(exit_code)
        if ignore_term:
            e["IGNORE_TERM"] = "1"
        return e

    def size(self):
        try:
            return os.path.getsize(self.out)
        except FileNotFoundError:
            return 0

    def log(self):
        """A file for run's stderr (a pipe would stay open as long as the loop runs)."""
        return open(self.out + ".stderr", "wb")

    def stderr(self):
        with open(self.out + ".stderr", "rb") as f:
            return f.read().decode(errors="replace")

    def wait_writing(self):
        deadline = time.time() + 10
        while self.size() < 20 and time.time() < deadline:
            time.sleep(0.02)
        return self.size() >= 20

    def still_writing(self, settle=1.0, watch=0.5):
        """True if the file still grows `settle` s from now (leaves time to stop)."""
        time.sleep(settle)
        before = self.size()
        time.sleep(watch)
        return self.size() > before

    def cleanup(self):
        # Only the loop the test started, by its recorded pid, and only if it is still that one.
        try:
            pid = int(open(self.pidfile).read())
            with open("/proc/%d/environ" % pid, "rb") as f:
                if (b"OUT=" + self.out.encode()) in f.read():
                    os.kill(pid, signal.SIGKILL)
        except (OSError, ValueError):
            pass


class Run(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.c = Cluster(3)

    @classmethod
    def tearDownClass(cls):
        cls.c.close()

    def env(self):
        e = dict(os.environ)
        e["REDLOCK_NODES"] = self.c.nodes
        e.pop("REDLOCK_MIN_UPTIME", None)
        return e

    def run_cli(self, *args, timeout=30):
        return subprocess.run(CLI_ARGV + list(args), capture_output=True, env=self.env(), timeout=timeout)

    def test_exit_status_passes_through(self):
        for code in (0, 1, 7, 42):
            r = self.run_cli("run", "run-status", "--", "sh", "-c", "exit %d" % code)
            self.assertEqual(r.returncode, code, r.stderr)
        self.assertEqual(self.c.settled_count(0, "run-status"), 0)

    def test_killed_by_signal_is_128_plus_n_and_releases(self):
        r = self.run_cli("run", "run-sig", "--", "sh", "-c", "kill -9 $$")
        self.assertEqual(r.returncode, 128 + 9)
        self.assertEqual(self.c.settled_count(0, "run-sig"), 0)

    def test_environment_has_the_lock_and_it_is_held_meanwhile(self):
        script = 'echo "$REDLOCK_RESOURCE $REDLOCK_TOKEN"'
        with tempfile.TemporaryDirectory() as d:
            # While the command runs the key holds its token on a quorum. The command waits for the
            # test's "go" rather than sleeping a while: under --stress a 0.3 s sleep ended before
            # the test looked (the key was already released).
            out, go = os.path.join(d, "out"), os.path.join(d, "go")
            check = ('echo "$REDLOCK_RESOURCE $REDLOCK_TOKEN" > %s.tmp && mv %s.tmp %s; '
                     'while [ ! -e %s ]; do sleep 0.02; done' % (out, out, out, go))
            p = subprocess.Popen([*CLI_ARGV, "run", "run-env", "--", "sh", "-c", check], env=self.env())
            self.assertTrue(wait_until(lambda: os.path.exists(out), timeout=10))
            with open(out) as f:
                line = f.read().split()
            self.assertEqual(line[0], "run-env")
            self.assertRegex(line[1], "^[0-9a-f]{40}$")
            self.assertGreaterEqual(self.c.count_with("run-env", line[1]), 2)
            open(go, "w").close()
            self.assertEqual(p.wait(10), 0)
        self.assertEqual(self.c.settled_count(0, "run-env"), 0)
        r = self.run_cli("run", "run-env2", "--", "sh", "-c", script)
        self.assertTrue(r.stdout.decode().startswith("run-env2 "))

    def test_held_elsewhere_exits_1_without_running(self):
        tok = self.run_cli("acquire", "run-held").stdout.decode().strip()
        with tempfile.TemporaryDirectory() as d:
            marker = os.path.join(d, "ran")
            r = self.run_cli("--retry-count", "0", "run", "run-held", "--", "touch", marker)
            self.assertEqual(r.returncode, 1)
            self.assertFalse(os.path.exists(marker))
        self.run_cli("release", "run-held", tok)

    def test_held_elsewhere_is_not_retried_without_wait(self):
        # As `flock -n`: one attempt, then exit 1 (-v counts the attempts).
        tok = self.run_cli("acquire", "run-once").stdout.decode().strip()
        r = self.run_cli("-v", "run", "run-once", "--", "true")
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn(b"\n  1 attempt\n", r.stderr)
        self.run_cli("release", "run-once", tok)

    def test_several_resources_are_one_lock(self):
        # `run a b -- cmd` like `acquire a b`: one token on both keys while the command runs.
        with tempfile.TemporaryDirectory() as d:
            out, go = os.path.join(d, "env"), os.path.join(d, "go")
            script = ('printf "%%s|%%s|%%s" "$REDLOCK_RESOURCE" "$REDLOCK_RESOURCES" "$REDLOCK_TOKEN" > %s; '
                      'while [ ! -e %s ]; do sleep 0.02; done' % (out, go))
            p = subprocess.Popen([*CLI_ARGV, "run", "multi-a", "multi-b", "--", "sh", "-c", script], env=self.env())
            for _ in range(100):
                if os.path.exists(out) and open(out).read().count("|") == 2:
                    break
                time.sleep(0.02)
            first, all_, token = open(out).read().split("|")
            self.assertEqual((first, all_), ("multi-a", "multi-a\nmulti-b"))
            self.assertGreaterEqual(self.c.count_with("multi-a", token), 2)
            self.assertGreaterEqual(self.c.count_with("multi-b", token), 2)
            open(go, "w").close()
            self.assertEqual(p.wait(10), 0)
        self.assertEqual(self.c.settled_count(0, "multi-a") + self.c.settled_count(0, "multi-b"), 0)
        # All or nothing: one of them held elsewhere, the command does not run, nothing is kept.
        tok = self.run_cli("acquire", "multi-b").stdout.decode().strip()
        with tempfile.TemporaryDirectory() as d:
            marker = os.path.join(d, "ran")
            r = self.run_cli("run", "multi-a", "multi-b", "--", "touch", marker)
            self.assertEqual(r.returncode, 1, r.stderr)
            self.assertFalse(os.path.exists(marker))
        self.assertEqual(self.c.settled_count(0, "multi-a"), 0)
        self.run_cli("release", "multi-b", tok)
        # Without "--", flock(1)'s form: the first word is the resource, the rest the command.
        r = self.run_cli("run", "multi-flock", "printenv", "REDLOCK_RESOURCES")
        self.assertEqual((r.returncode, r.stdout), (0, b"multi-flock\n"), r.stderr)

    def test_conflict_exit_code(self):
        # -E N: the code for "held elsewhere", so that the command's own 1 means the command's.
        tok = self.run_cli("acquire", "run-conflict").stdout.decode().strip()
        for flag in ("-E", "--conflict-exit-code"):
            r = self.run_cli("run", "run-conflict", flag, "75", "--", "true")
            self.assertEqual(r.returncode, 75, r.stderr)
        self.run_cli("release", "run-conflict", tok)
        r = self.run_cli("run", "-E", "75", "run-conflict", "--", "sh", "-c", "exit 1")
        self.assertEqual(r.returncode, 1, r.stderr)
        # No quorum is not a conflict: still 3.
        e = self.env()
        e["REDLOCK_NODES"] = self.c.servers[0].address + ",127.0.0.1:1,127.0.0.1:2"
        r = subprocess.run([*CLI_ARGV, "--retry-count", "0", "run", "-E", "75", "run-conflict", "--", "true"],
                           capture_output=True, env=e, timeout=30)
        self.assertEqual(r.returncode, 3, r.stderr)
        for bad in ("256", "-1", "x"):
            r = self.run_cli("run", "-E", bad, "run-conflict", "--", "true")
            self.assertEqual(r.returncode, 2, (bad, r.stderr))

    def test_key_prefix(self):
        # --key-prefix maps to the library's Options::key_prefix: the key is prefix + resource,
        # the command still sees the resource.
        r = self.run_cli("--key-prefix", "svc:", "run", "run-prefixed", "--", "sh", "-c",
                         'echo "$REDLOCK_RESOURCE $REDLOCK_TOKEN"; sleep 0.3')
        self.assertEqual(r.returncode, 0, r.stderr)
        resource, token = r.stdout.decode().split()
        self.assertEqual(resource, "run-prefixed")
        with tempfile.TemporaryDirectory() as d:
            out, go = os.path.join(d, "tok"), os.path.join(d, "go")
            p = subprocess.Popen([*CLI_ARGV, "--key-prefix", "svc:", "run", "run-prefixed", "--", "sh", "-c",
                                  'echo "$REDLOCK_TOKEN" > %s; while [ ! -e %s ]; do sleep 0.02; done' % (out, go)],
                                 env=self.env())
            for _ in range(100):
                if os.path.exists(out) and open(out).read().endswith("\n"):
                    break
                time.sleep(0.02)
            token = open(out).read().strip()
            self.assertGreaterEqual(self.c.count_with("svc:run-prefixed", token), 2)
            self.assertEqual(self.c.settled_count(0, "run-prefixed"), 0)
            open(go, "w").close()
            self.assertEqual(p.wait(10), 0)
        self.assertEqual(self.c.settled_count(0, "svc:run-prefixed"), 0)

    def test_wait_until_the_holder_leaves(self):
        tok = self.run_cli("acquire", "run-wait", "--ttl", "10s").stdout.decode().strip()
        releaser = subprocess.Popen(["sh", "-c", "sleep 0.6; exec \"$0\" release run-wait " + tok, CLI], env=self.env())
        start = time.time()
        r = self.run_cli("--retry-delay", "100ms", "run", "run-wait", "--wait", "5s", "--", "true")
        took = time.time() - start
        releaser.wait(10)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertGreater(took, 0.5)
        self.assertLess(took, 4)

    def test_sigint_is_forwarded(self):
        with tempfile.TemporaryDirectory() as d:
            marker, ready = os.path.join(d, "got-int"), os.path.join(d, "ready")
            script = "trap 'touch %s; exit 42' INT; touch %s; while :; do sleep 0.05; done" % (marker, ready)
            p = subprocess.Popen([*CLI_ARGV, "run", "run-int", "--", "sh", "-c", script], env=self.env())
            self.assertTrue(wait_until(lambda: os.path.exists(ready), timeout=10))
            p.send_signal(signal.SIGINT)
            self.assertEqual(p.wait(10), 42)
            self.assertTrue(os.path.exists(marker))
        self.assertEqual(self.c.settled_count(0, "run-int"), 0)

    def test_sigterm_to_run_terminates_command_and_releases(self):
        with tempfile.TemporaryDirectory() as d:
            ready = os.path.join(d, "ready")
            p = subprocess.Popen([*CLI_ARGV, "run", "run-term", "--", "sh", "-c", "touch %s; exec sleep 30" % ready],
                                 env=self.env())
            self.assertTrue(wait_until(lambda: os.path.exists(ready), timeout=10))
            p.send_signal(signal.SIGTERM)
            self.assertEqual(p.wait(10), 128 + signal.SIGTERM)
        self.assertEqual(self.c.settled_count(0, "run-term"), 0)

    def test_lost_lock_sigterms_the_command_and_exits_4(self):
        with tempfile.TemporaryDirectory() as d:
            marker, ready = os.path.join(d, "got-term"), os.path.join(d, "ready")
            script = "trap 'touch %s; exit 0' TERM; touch %s; while :; do sleep 0.05; done" % (marker, ready)
            p = subprocess.Popen([*CLI_ARGV, "run", "run-lost", "--ttl", "600ms", "--", "sh", "-c", script],
                                 env=self.env(), stderr=subprocess.PIPE)
            self.assertTrue(wait_until(lambda: os.path.exists(ready), timeout=10))
            for s in self.c.servers:
                command(s.port, "DEL", "run-lost")
            # Noticed at the next extension (every ttl/3), not left to run on: p.wait's 10 s bound
            # is the check (a speed is not).
            self.assertEqual(p.wait(10), 4)
            self.assertTrue(os.path.exists(marker))
            self.assertIn(b"lost", p.stderr.read())

    def test_renew_deadline_signals_the_job_before_the_validity_ends(self):
        # A majority of the nodes paused: no extension can succeed. The job gets SIGTERM at the
        # renew deadline (2/3 of the ttl), a third of the ttl before another client could take
        # the lock, not when its validity ends. (With --node-timeout 600ms the paused nodes'
        # connections are not dropped as stalled before the ttl: they time out, never show as
        # down.)
        ttl, drift = 6.0, 6.0 * 0.01 + 0.002
        for attempt in range(3):
            resource = "run-renew-%d" % attempt
            before, paused, termed, err = self.run_until_renew_deadline(resource, ttl)
            # The nodes were paused before the first extension was due (ttl/3 after the
            # acquisition started, which was after `before`): the deadlines are the acquisition's.
            # Otherwise (a very slow start) this run cannot tell, and the next one tries again.
            if paused - before < ttl / 3 - 0.1:
                break
        else:
            self.fail("the lock was never taken within a third of the ttl")
        # Before the lock's validity ends (at t1 + ttl - drift, later than before + that) ...
        self.assertLess(termed, before + ttl - drift, "SIGTERM %.3f s after the start" % (termed - before))
        # ... and not before the renew deadline (t1 + 2/3 ttl - drift, t1 >= before; the job's
        # clock, /proc/uptime, counts in steps of 10 ms).
        self.assertGreaterEqual(termed, before + ttl * 2 / 3 - drift - 0.01)
        self.assertIn("renew deadline", err)
        self.assertIn("extending the lock on '%s' failed" % resource, err)

    def run_until_renew_deadline(self, resource, ttl):
        """Runs a job under `run RESOURCE --ttl TTL`, pauses two of the three nodes as soon as they
        have the lock, and returns (before run started, when the nodes were paused, when the job
        got SIGTERM, run's stderr), in seconds of CLOCK_BOOTTIME (the library's clock, and what
        /proc/uptime shows the job)."""
        def now():
            return time.clock_gettime(time.CLOCK_BOOTTIME)
        with tempfile.TemporaryDirectory() as d:
            term = os.path.join(d, "term")
            # sh, not a heavier interpreter: under load its start alone took seconds.
            job = ('trap \'read up _ < /proc/uptime; echo "$up" > "%s"; exit 0\' TERM; '
                   'while :; do sleep 0.05; done' % term)
            before = now()
            p = subprocess.Popen([CLI, "--node-timeout", "600ms", "run", resource, "--ttl", "%gs" % ttl, "--",
                                  "sh", "-c", job],
                                 env=self.env(), stderr=subprocess.PIPE)
            try:
                held = [s for s in self.c.servers[:2]]
                self.assertTrue(wait_until(lambda: all(get(s.port, resource) for s in held), timeout=20))
                for s in held:
                    s.stop()
                paused = now()
                self.assertEqual(p.wait(30), 4)
            finally:
                for s in self.c.servers[:2]:
                    s.cont()
                if p.poll() is None:
                    p.kill()
                    p.wait()
            with open(term) as f:
                termed = float(f.read())
            err = p.stderr.read().decode()
            p.stderr.close()
        # Released by run once the job ended, or expired: gone either way.
        self.assertEqual(self.c.settled_count(0, resource), 0)
        return before, paused, termed, err

    def test_lost_lock_then_sigkill_after_grace(self):
        with tempfile.TemporaryDirectory() as d:
            ready = os.path.join(d, "ready")
            p = subprocess.Popen([*CLI_ARGV, "run", "run-stubborn", "--ttl", "600ms", "--grace", "300ms", "--",
                                  "sh", "-c", "trap '' TERM; touch %s; while :; do sleep 0.05; done" % ready],
                                 env=self.env(), stderr=subprocess.DEVNULL)
            self.assertTrue(wait_until(lambda: os.path.exists(ready), timeout=10))
        for s in self.c.servers:
            command(s.port, "DEL", "run-stubborn")
        self.assertEqual(p.wait(10), 4)

    def test_lost_lock_stops_the_commands_own_children(self):
        # The lock is lost: SIGTERM reaches the script *and* the loop it started in the
        # background, which must stop writing (the loop ignores nothing, so SIGTERM suffices).
        with tempfile.TemporaryDirectory() as d:
            gc = Grandchild(d)
            try:
                p = subprocess.Popen([*CLI_ARGV, "run", "run-lost-gc", "--ttl", "600ms", "--", "sh", "-c",
                                      GRANDCHILD_JOB], env=gc.env(self.env()), stderr=gc.log())
                self.assertTrue(gc.wait_writing())
                for s in self.c.servers:
                    command(s.port, "DEL", "run-lost-gc")
                self.assertEqual(p.wait(10), 4, gc.stderr())
                self.assertFalse(gc.still_writing(), "the command's child outlived the lock")
            finally:
                gc.cleanup()

    def test_lost_lock_sigkills_children_that_ignore_sigterm(self):
        with tempfile.TemporaryDirectory() as d:
            gc = Grandchild(d)
            try:
                p = subprocess.Popen([*CLI_ARGV, "run", "run-lost-gc9", "--ttl", "600ms", "--grace", "300ms",
                                      "--", "sh", "-c", GRANDCHILD_JOB], env=gc.env(self.env(), ignore_term=True),
                                     stderr=gc.log())
                self.assertTrue(gc.wait_writing())
                for s in self.c.servers:
                    command(s.port, "DEL", "run-lost-gc9")
                self.assertEqual(p.wait(10), 4, gc.stderr())
                self.assertFalse(gc.still_writing(settle=0.3), "run exited with the job still running")
            finally:
                gc.cleanup()

    def test_kill_9_of_run_stops_the_whole_job(self):
        # run itself is SIGKILLed: nothing of it can act any more, yet neither the command nor its
        # child may keep working while the lock runs out and another client takes it.
        with tempfile.TemporaryDirectory() as d:
            gc = Grandchild(d)
            try:
                p = subprocess.Popen([*CLI_ARGV, "run", "run-kill9", "--ttl", "1s", "--", "sh", "-c", GRANDCHILD_JOB],
                                     env=gc.env(self.env()), stderr=subprocess.DEVNULL)
                self.assertTrue(gc.wait_writing())
                p.kill()
                p.wait(10)
                self.assertFalse(gc.still_writing(), "the job outlived run (kill -9)")
                # The lock was not released (run had no chance), but nobody works under it: it
                # expires within its ttl and the next client gets it.
                r = self.run_cli("run", "run-kill9", "--wait", "5s", "--", "true")
                self.assertEqual(r.returncode, 0, r.stderr)
            finally:
                gc.cleanup()

    def test_the_job_ends_before_the_lock_is_released(self):
        # The command exits and leaves a background child working: it would work without the
        # lock once run releases it, so it is stopped first (SIGTERM, SIGKILL after --grace).
        with tempfile.TemporaryDirectory() as d:
            gc = Grandchild(d)
            try:
                # Output to files: a pipe would stay open as long as the loop runs.
                p = subprocess.Popen([*CLI_ARGV, "run", "run-leftover", "--grace", "1s", "--", "sh", "-c", GRANDCHILD_JOB],
                                     env=gc.env(self.env(), exit_code=7), stderr=gc.log())
                self.assertEqual(p.wait(30), 7, gc.stderr())  # the command's own status
                self.assertIn("still running", gc.stderr())
                self.assertFalse(gc.still_writing(settle=0.1), "a process of the job outlived the lock")
                self.assertEqual(self.c.settled_count(0, "run-leftover"), 0)
            finally:
                gc.cleanup()

    def test_an_interactive_command_gets_the_terminal(self):
        # On a terminal, with run in the foreground, the job gets the terminal: a command that
        # reads it is not stopped (SIGTTIN) for being in a process group of its own, and Ctrl-Z
        # and Ctrl-C reach it.
        pid, fd = pty.fork()
        if pid == 0:  # the child: a session leader on the pty, as a shell's job would be
            try:
                # Builtins only: Ctrl-Z must not land between dash's vfork and exec of a child,
                # which leaves dash unstoppable in any shell.
                os.execvpe(CLI, [*CLI_ARGV, "run", "run-tty", "--", "sh", "-c",
                                 'read line; echo "got $line"; read more'], self.env())
            finally:
                os._exit(99)
        out = b""
        try:
            deadline = time.time() + 10
            time.sleep(0.5)
            os.write(fd, b"hello\n")
            while b"got hello" not in out and time.time() < deadline:
                if not select.select([fd], [], [], 0.1)[0]:
                    continue
                try:
                    out += os.read(fd, 1024)
                except OSError:
                    break
            self.assertIn(b"got hello", out)
            # Ctrl-Z stops the job, and run with it, so that a shell sees its job stopped; SIGCONT
            # (the shell's fg) continues both and gives the terminal back to the job.
            os.write(fd, b"\x1a")
            for _ in range(500):
                done, status = os.waitpid(pid, os.WNOHANG | os.WUNTRACED)
                if done:
                    break
                time.sleep(0.02)
            self.assertTrue(done and os.WIFSTOPPED(status), "run did not stop with its job")
            os.kill(pid, signal.SIGCONT)
            time.sleep(0.3)
            os.write(fd, b"\x03")  # Ctrl-C: SIGINT to the terminal's foreground group
            for _ in range(500):
                done, status = os.waitpid(pid, os.WNOHANG)
                if done:
                    break
                time.sleep(0.02)
            self.assertTrue(done, "run did not end after Ctrl-C")
            self.assertTrue(os.WIFEXITED(status), status)
            self.assertEqual(os.WEXITSTATUS(status), 128 + signal.SIGINT)
        finally:
            try:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
            except OSError:
                pass
            os.close(fd)
        self.assertEqual(self.c.settled_count(0, "run-tty"), 0)

    def test_extends_while_the_command_runs(self):
        # 3.5 times the ttl, about 10 extensions (every ttl/3); a ttl of 1 s, not less, so that one
        # late extension on a loaded machine does not lose the lock.
        r = self.run_cli("run", "run-long", "--ttl", "1s", "--", "sh", "-c", "sleep 3.5")
        self.assertEqual(r.returncode, 0, r.stderr)

    def hold(self, resource):
        r = self.run_cli("acquire", resource, "--ttl", "30s")
        self.assertEqual(r.returncode, 0, r.stderr)
        return r.stdout.decode().strip()

    def waiting_everywhere(self, resource):
        """Once every node has the resource's `waiting` mark (README, "Key layout"), a waiting
        command has made a refused attempt: its signal handling is set up by then. A fixed sleep
        could end before that on a loaded machine, and the signal would kill it unhandled."""
        key = "{%s}:redlock:waiting:%s" % (resource, resource)
        return wait_until(lambda: all(command(s.port, "EXISTS", key).startswith(b":1")
                                      for s in self.c.servers), 10)

    def test_ctrl_c_during_acquire_wait_ends_it_and_keeps_nothing(self):
        token = self.hold("intr-acq")
        p = subprocess.Popen([*CLI_ARGV, "acquire", "intr-acq", "--wait", "30s"], env=self.env(),
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.assertTrue(self.waiting_everywhere("intr-acq"))  # refused attempts, then it waits
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=10)  # long before the 30 s wait would end
        self.assertEqual(p.returncode, 128 + signal.SIGINT, err)
        self.assertEqual(out, b"")  # no token: nothing is held
        self.assertIn(b"interrupted by SIGINT", err)
        self.assertEqual(self.c.settled_count(3, "intr-acq", token), 3)  # the holder is untouched
        self.assertEqual(self.c.settled_count(3, "intr-acq"), 3)
        self.assertEqual(self.run_cli("release", "intr-acq", token).returncode, 0)

    def test_sigterm_during_run_wait_does_not_start_the_command(self):
        token = self.hold("intr-run")
        with tempfile.TemporaryDirectory() as d:
            marker = os.path.join(d, "ran")
            p = subprocess.Popen([*CLI_ARGV, "run", "intr-run", "--wait", "30s", "--", "touch", marker],
                                 env=self.env(), stderr=subprocess.PIPE)
            self.assertTrue(self.waiting_everywhere("intr-run"))
            p.send_signal(signal.SIGTERM)
            _, err = p.communicate(timeout=10)
            self.assertEqual(p.returncode, 128 + signal.SIGTERM, err)
            self.assertIn(b"was not started", err)
            time.sleep(0.2)
            self.assertFalse(os.path.exists(marker))
        self.assertEqual(self.c.settled_count(3, "intr-run", token), 3)
        self.assertEqual(self.run_cli("release", "intr-run", token).returncode, 0)

    def test_fence_is_exported_and_grows(self):
        fences = []
        for _ in range(2):
            r = self.run_cli("run", "run-fence", "--fence", "--", "sh", "-c", 'echo "$REDLOCK_FENCE"')
            self.assertEqual(r.returncode, 0, r.stderr)
            fences.append(int(r.stdout.decode().strip()))
        self.assertGreater(fences[1], fences[0])
        r = self.run_cli("run", "run-nofence", "--", "sh", "-c", 'echo "${REDLOCK_FENCE-unset}"')
        self.assertEqual(r.stdout.decode().strip(), "unset")

    def test_read_write_and_fair_modes(self):
        with tempfile.TemporaryDirectory() as d:
            started = os.path.join(d, "reader")
            # A reader that runs until told to stop; a second reader runs beside it; a writer waits.
            r1 = subprocess.Popen([*CLI_ARGV, "run", "run-rw", "--read", "--", "sh", "-c",
                                   'touch %s; while [ ! -e %s.stop ]; do sleep 0.05; done' % (started, started)],
                                  env=self.env())
            for _ in range(100):
                if os.path.exists(started):
                    break
                time.sleep(0.05)
            self.assertTrue(os.path.exists(started))
            r2 = self.run_cli("run", "run-rw", "--read", "--", "true")
            self.assertEqual(r2.returncode, 0, r2.stderr)
            w = self.run_cli("--retry-count", "0", "run", "run-rw", "--write", "--", "true")
            self.assertEqual(w.returncode, 1, w.stderr)  # readers hold it
            open(started + ".stop", "w").close()
            self.assertEqual(r1.wait(10), 0)
        w = self.run_cli("run", "run-rw", "--write", "--wait", "2s", "--", "true")
        self.assertEqual(w.returncode, 0, w.stderr)
        f = self.run_cli("run", "run-fair", "--fair", "--wait", "2s", "--", "sh", "-c", 'echo "$REDLOCK_RESOURCE"')
        self.assertEqual((f.returncode, f.stdout.decode().strip()), (0, "run-fair"), f.stderr)
        self.assertEqual(self.c.settled_count(0, "run-rw"), 0)
        self.assertEqual(self.c.settled_count(0, "run-fair"), 0)

    def test_usage_errors(self):
        for args in (["run", "x"], ["run", "x", "y", "--"], ["run", "x", "--ttl", "0", "--", "true"], ["run", "", "--", "true"],
                     ["run", "x", "--grace", "soon", "--", "true"]):
            r = self.run_cli(*args)
            self.assertEqual(r.returncode, 2, (args, r.stderr))
        r = self.run_cli("run", "run-missing", "--", "/nonexistent/command")
        self.assertEqual(r.returncode, 127)
        self.assertEqual(self.c.settled_count(0, "run-missing"), 0)


if __name__ == "__main__":
    unittest.main(verbosity=2)
