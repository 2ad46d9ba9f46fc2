"""The hand-written man page and bash completion: they render / source cleanly, they work, and
they do not fall behind the CLI (every command and flag that `--help` lists must be in both)."""
import os
import re
import shutil
import subprocess
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.environ.get("REDLOCK_SOURCE_ROOT", os.path.join(HERE, "..", ".."))
CLI = os.environ.get("REDLOCK_CLI", "redlock-cli")
MAN = os.path.join(SOURCE, "docs", "redlock-cli.1")
COMPLETION = os.path.join(SOURCE, "tools", "redlock-cli.bash")

COMMANDS = ["acquire", "release", "extend", "status", "run", "elect", "leader", "observe", "cluster",
            "bench", "demo", "doctor"]
CLUSTER_COMMANDS = ["up", "down", "status", "env", "kill", "stop", "cont", "start"]


def run(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=60, **kw)


def help_options(*args):
    """The option lines of `redlock-cli ARGS --help`: [(names, type name or "")], where names are
    the option's flags ("-E", "--conflict-exit-code") and the type name is what it takes ("N",
    "TEXT"; "" for a flag that takes nothing)."""
    r = run([CLI] + list(args) + ["--help"])
    assert r.returncode == 0, r.stderr
    options = []
    for names, value in re.findall(r"(?m)^  (-[-\w]*(?:,-[-\w]+)*)(?: ([A-Z][A-Z_]*))?(?:  |$)", r.stdout):
        options.append((names.split(","), value))
    return options, r.stdout


def help_flags(*args):
    """Flags (short and long) listed by `redlock-cli ARGS --help`, and its subcommands."""
    options, text = help_options(*args)
    flags = {n for names, _ in options for n in names if n not in ("-h", "--help")}
    subs = re.search(r"(?ms)^Subcommands:\n(.*?)(?:\n\n|\Z)", text)
    commands = re.findall(r"(?m)^  (\w+)\s", subs.group(1)) if subs else []
    return flags, commands


def every_help(*args):
    """(args, options) of the top level, every command and every cluster subcommand."""
    out = [((), help_options()[0])]
    for c in COMMANDS:
        out.append(((c,), help_options(c)[0]))
    for c in CLUSTER_COMMANDS:
        out.append((("cluster", c), help_options("cluster", c)[0]))
    return out


def complete(line):
    """What the completion offers for `line` (the cursor at its end), via the function itself."""
    script = (
        'source "$1" || exit 9\n'
        'COMP_LINE="$2"; COMP_POINT=${#COMP_LINE}\n'
        'read -r -a COMP_WORDS <<<"$COMP_LINE"\n'
        'COMP_CWORD=$(( ${#COMP_WORDS[@]} - 1 ))\n'
        'if [[ $COMP_LINE == *" " ]]; then COMP_WORDS+=(""); COMP_CWORD=$((COMP_CWORD + 1)); fi\n'
        '_redlock_cli\n'
        'printf "%s\\n" "${COMPREPLY[@]}"\n')
    r = run(["bash", "--norc", "--noprofile", "-c", script, "bash", COMPLETION, line])
    assert r.returncode == 0, r.stderr
    return [w for w in r.stdout.split("\n") if w]


class ManPage(unittest.TestCase):
    def test_renders_without_warnings(self):
        if shutil.which("man"):
            env = dict(os.environ, MANWIDTH="80", LC_ALL="C.UTF-8", MAN_KEEP_FORMATTING="")
            r = run(["man", "--warnings", "-l", MAN], env=env)
        elif shutil.which("groff"):
            r = run(["groff", "-man", "-ww", "-z", "-Tutf8", MAN])
        else:
            self.skipTest("neither man nor groff installed")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stderr, "", "warnings while rendering the man page")
        if shutil.which("man"):
            self.assertIn("REDLOCK-CLI(1)", r.stdout)
            for section in ["SYNOPSIS", "GLOBAL OPTIONS", "COMMANDS", "EXIT STATUS", "ENVIRONMENT"]:
                self.assertIn("\n" + section, r.stdout)

    def test_strict_groff_check(self):
        if not shutil.which("groff"):
            self.skipTest("groff not installed")
        r = run(["groff", "-man", "-ww", "-z", MAN])
        self.assertEqual((r.returncode, r.stderr), (0, ""))

    def test_documents_every_command_and_flag_of_the_cli(self):
        with open(MAN) as f:
            text = f.read().replace("\\-", "-")
        flags, commands = help_flags()
        self.assertEqual(sorted(commands), sorted(COMMANDS))
        for c in COMMANDS:
            sub_flags, _ = help_flags(c)
            flags |= sub_flags
            self.assertRegex(text, r"\.SS \"?%s\b" % c, "command %s has no section" % c)
        for c in CLUSTER_COMMANDS:
            flags |= help_flags("cluster", c)[0]
        for flag in sorted(flags):
            # As a word: "-E" must not pass for being part of "-E," elsewhere by accident only.
            self.assertRegex(text, r"(?<![\w-])%s(?![\w-])" % re.escape(flag),
                             "%s is in --help but not in the man page" % flag)


class BashCompletion(unittest.TestCase):
    def test_sources_cleanly_under_strict_mode(self):
        r = run(["bash", "--norc", "--noprofile", "-c",
                 'set -euo pipefail; source "$1"; complete -p redlock-cli', "bash", COMPLETION])
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stderr, "")
        self.assertIn("complete -F _redlock_cli redlock-cli", r.stdout)

    def test_completes_subcommands(self):
        self.assertEqual(complete("redlock-cli ac"), ["acquire"])
        self.assertEqual(sorted(complete("redlock-cli ")), sorted(COMMANDS))
        self.assertEqual(complete("redlock-cli re"), ["release"])
        # A node list (with ':' and ',') before the command is skipped as the value of -n.
        self.assertEqual(complete("redlock-cli -n 127.0.0.1:7001,127.0.0.1:7002 ex"), ["extend"])
        self.assertEqual(sorted(complete("redlock-cli cluster ")), sorted(CLUSTER_COMMANDS))
        self.assertEqual(complete("redlock-cli cluster up --persistence "), ["none", "aof"])
        self.assertEqual(complete("redlock-cli cluster up --topology "), ["standalone", "sentinel", "cluster"])
        self.assertEqual(complete("redlock-cli demo --topology s"), ["standalone", "sentinel"])
        self.assertEqual(complete("redlock-cli demo --topology c"), ["cluster"])
        self.assertIn("--replicas", complete("redlock-cli cluster up --topology cluster --rep"))

    def test_flags_per_subcommand(self):
        self.assertEqual(complete("redlock-cli acquire job --fe"), ["--fence"])
        self.assertIn("--ttl", complete("redlock-cli extend job tok --"))
        self.assertNotIn("--ttl", complete("redlock-cli release job tok --"))
        self.assertNotIn("--delay", complete("redlock-cli cluster up --"))
        self.assertIn("--delay", complete("redlock-cli cluster start 2 --"))
        # Global flags are accepted after the command too.
        self.assertIn("--nodes", complete("redlock-cli status job --"))
        # After `run RESOURCE... --`: the command to run.
        self.assertIn("bash", complete("redlock-cli run job -- bas"))
        self.assertIn("bash", complete("redlock-cli run a b -E 9 -- bas"))
        self.assertIn("--conflict-exit-code", complete("redlock-cli run job --con"))

    def test_knows_which_flags_take_a_value(self):
        # The word after a flag that takes a value is that value, never a subcommand or a
        # resource: the completion must know every such flag, short and long.
        script = 'source "$1"; shift; for f; do _redlock_cli_takes_value "$f" || echo "$f"; done'
        takes, plain = set(), set()
        for _, options in every_help():
            for names, value in options:
                (takes if value else plain).update(n for n in names if n not in ("-h", "--help"))
        self.assertIn("-E", takes)
        self.assertIn("--key-prefix", takes)
        r = run(["bash", "--norc", "--noprofile", "-c", script, "bash", COMPLETION] + sorted(takes))
        self.assertEqual(r.stdout.split(), [], "flags with a value that the completion does not know")
        script = 'source "$1"; shift; for f; do _redlock_cli_takes_value "$f" && echo "$f"; done; true'
        r = run(["bash", "--norc", "--noprofile", "-c", script, "bash", COMPLETION] + sorted(plain - takes))
        self.assertEqual(r.stdout.split(), [], "flags without a value that the completion skips a word after")

    def test_offers_every_flag_of_the_cli(self):
        for c in COMMANDS:
            offered = set(complete("redlock-cli %s -" % c))  # "-": short flags too
            flags, _ = help_flags(c)
            if c == "cluster":
                for sub in CLUSTER_COMMANDS:
                    sub_flags = help_flags(c, sub)[0]
                    offered_sub = set(complete("redlock-cli cluster %s -" % sub))
                    self.assertEqual(sorted(sub_flags - offered_sub), [], "cluster " + sub)
            self.assertEqual(sorted(flags - offered), [], "flags of %s missing from the completion" % c)


if __name__ == "__main__":
    unittest.main(verbosity=2)
