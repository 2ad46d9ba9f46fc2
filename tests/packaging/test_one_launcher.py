#!/usr/bin/env python3
"""One server launcher for every test (issue 42 item 4), checked on the source tree.

The tests start redis-server / valkey-server in one way: the C++ fixture (tests/support/
redis_fixture.cpp over tools/nodes/launcher.cpp), which the Python and C tests reach as a
program, tests/support/node-launcher (tests/cli/redisfix.py's Server, tests/capi/capi_test.c).
So a free port with a repick when it is taken, the binary the suite names, a temp dir, waiting for
our own process to answer, the version check and the clean-up live once. `redlock-cli cluster`
starts servers through the same tools/nodes/launcher.cpp.

What is looked for, in every file under tests/ (this file aside: it names the patterns):
- Python: a call that starts a process (subprocess.*, os.exec*/spawn*/system/popen, ...) whose
  arguments name a server binary: a string like "redis-server", or a variable set from one or
  from $REDLOCK_TEST_REDIS_SERVER / $REDLOCK_REDIS_SERVER;
- C and C++: an exec*/posix_spawn*/system/popen call whose arguments name a server binary or
  read one of those variables;
- shell: a server binary at a command's position.
A wrapper script that a test writes for `redlock-cli cluster` to start (tests/cli/test_cluster.py)
is started by the launcher, so it is not a start of its own.

ALLOWED lists the files that may, each with its reason; a listing that is no longer needed fails,
so the list only shrinks. Run with REDLOCK_SOURCE_ROOT=<another checkout> to check that tree.
"""
import ast
import os
import re
import unittest

ROOT = os.environ.get("REDLOCK_SOURCE_ROOT") or os.path.join(os.path.dirname(__file__), "..", "..")
SELF = "tests/packaging/test_one_launcher.py"

# A server binary by name, or the variables that name the binary to start.
SERVER_NAME = re.compile(r"\b(?:redis|valkey)-(?:server|sentinel)\b")
SERVER_VARIABLE = re.compile(r"\bREDLOCK_(?:TEST_)?REDIS_SERVER\b")

# Files that may start a server binary themselves, and why. Empty: every test goes through the
# launcher (the Sentinel fixture's sentinels too: RedisServer with a config file and --sentinel).
ALLOWED = {}

# ---- shell -------------------------------------------------------------------------------------

SH_START = re.compile(r"(?:^|[;&|(`]|\bthen|\bdo|\bexec(?:\s+-a\s+\S+)?)\s*[\"']?(?:\S*/)?"
                      r"(?:(?:redis|valkey)-(?:server|sentinel)\b|\$\{?REDLOCK_(?:TEST_)?REDIS_SERVER\b)")


def shell_starts(source):
    found = []
    for n, line in enumerate(source.splitlines(), 1):
        code = line.split("#", 1)[0] if not line.lstrip().startswith("#!") else ""
        if SH_START.search(code):
            found.append(n)
    return found


# ---- Python ------------------------------------------------------------------------------------

SUBPROCESS = {"Popen", "run", "call", "check_call", "check_output", "getoutput",
              "getstatusoutput"}
OTHER_STARTERS = {"os.system", "os.popen", "os.posix_spawn", "os.posix_spawnp", "pty.spawn",
                  "asyncio.create_subprocess_exec", "asyncio.create_subprocess_shell"}
OTHER_STARTER_PREFIXES = ("os.exec", "os.spawn")


def _dotted(node):
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = _dotted(node.value)
        return base + "." + node.attr if base else None
    return None


def _is_server(node, tainted):
    """True if the expression is a server binary (a path or name), or a command line or argv list
    that starts one: "redis-server", os.environ.get("REDLOCK_TEST_REDIS_SERVER") or ...,
    shutil.which("valkey-server"), [SERVER, "--port", p], [SERVER] + extra, a tainted name."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return bool(SERVER_VARIABLE.search(node.value) or SH_START.search(node.value))
    if isinstance(node, ast.Name):
        return node.id in tainted
    if isinstance(node, ast.BoolOp):
        return any(_is_server(v, tainted) for v in node.values)
    if isinstance(node, ast.IfExp):
        return _is_server(node.body, tainted) or _is_server(node.orelse, tainted)
    if isinstance(node, (ast.List, ast.Tuple)):
        return bool(node.elts) and _is_server(node.elts[0], tainted)
    if isinstance(node, ast.Starred):
        return _is_server(node.value, tainted)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return _is_server(node.left, tainted)
    if isinstance(node, ast.JoinedStr):
        return any(_is_server(v, tainted) for v in node.values[:1])
    if isinstance(node, ast.FormattedValue):
        return _is_server(node.value, tainted)
    if isinstance(node, ast.Subscript):  # os.environ["REDLOCK_TEST_REDIS_SERVER"]
        return _dotted(node.value) == "os.environ" and _is_server(node.slice, tainted)
    if isinstance(node, ast.Call):  # os.environ.get(...), os.getenv(...), shutil.which(...), ...
        return any(isinstance(a, ast.Constant) and _is_server(a, tainted) for a in node.args)
    return False


def python_starts(source):
    """Line numbers of the calls in `source` that start a server binary."""
    tree = ast.parse(source)
    # Names bound (anywhere in the file: scopes are not told apart) to a server binary or to a
    # command that starts one, e.g. SERVER = os.environ.get("REDLOCK_TEST_REDIS_SERVER") or
    # "redis-server", argv = [SERVER, "--port", p].
    tainted = set()
    changed = True
    while changed:
        changed = False
        for node in ast.walk(tree):
            if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                if _is_server(node.value, tainted):
                    for t in targets:
                        if isinstance(t, ast.Name) and t.id not in tainted:
                            tainted.add(t.id)
                            changed = True
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        name = _dotted(node.func) or ""
        if name.rsplit(".", 1)[-1] in SUBPROCESS and (name.startswith("subprocess.")
                                                      or "." not in name):
            # What is started: args (first), or executable=.
            program = [node.args[0]] if node.args else []
            program += [k.value for k in node.keywords if k.arg in ("args", "executable")]
        elif name in OTHER_STARTERS or name.startswith(OTHER_STARTER_PREFIXES):
            program = list(node.args)
        else:
            continue
        if any(_is_server(p, tainted) for p in program):
            found.append(node.lineno)
    return found


# ---- C and C++ ---------------------------------------------------------------------------------

C_COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)
C_STARTER = re.compile(r"\b(?:exec(?:l|lp|le|v|vp|vpe|ve)|fexecve|posix_spawnp?|system|popen)\s*\(")


def _call_arguments(text, open_paren):
    """The text between the parenthesis at open_paren and the one that closes it."""
    depth = 0
    for i in range(open_paren, len(text)):
        if text[i] == "(":
            depth += 1
        elif text[i] == ")":
            depth -= 1
            if depth == 0:
                return text[open_paren + 1:i]
    return text[open_paren + 1:]


def c_starts(source):
    """Line numbers of the exec/spawn calls in `source` whose arguments name a server binary."""
    # Comments blanked out (their newlines kept, so line numbers stay right).
    text = C_COMMENT.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), source)
    found = []
    for m in C_STARTER.finditer(text):
        args = _call_arguments(text, m.end() - 1)
        if SERVER_NAME.search(args) or SERVER_VARIABLE.search(args):
            found.append(text.count("\n", 0, m.start()) + 1)
    return found


SCANNERS = {".py": python_starts, ".c": c_starts, ".cc": c_starts, ".cpp": c_starts,
            ".h": c_starts, ".hpp": c_starts, ".sh": shell_starts}


def offenders(root):
    """{relative path: [line numbers]} of every file under tests/ that starts a server itself."""
    found = {}
    for dirpath, _, names in os.walk(os.path.join(root, "tests")):
        for name in sorted(names):
            scan = SCANNERS.get(os.path.splitext(name)[1])
            if scan is None:
                continue
            path = os.path.join(dirpath, name)
            rel = os.path.relpath(path, root).replace(os.sep, "/")
            if rel == SELF:
                continue
            with open(path, encoding="utf-8", errors="replace") as f:
                lines = scan(f.read())
            if lines:
                found[rel] = lines
    return found


class OneLauncher(unittest.TestCase):
    def test_no_test_starts_a_server_itself(self):
        found = {rel: lines for rel, lines in offenders(ROOT).items() if rel not in ALLOWED}
        self.assertEqual(found, {}, "these tests start a server binary themselves (file: lines); "
                         "start it through the launcher instead: redisfix.Server in Python, "
                         "tests/support/node-launcher from C, RedisServer in C++")

    def test_allow_list_is_needed(self):
        found = offenders(ROOT)
        self.assertEqual([rel for rel in ALLOWED if rel not in found], [],
                         "listed in ALLOWED but no longer starting a server: remove the listing")

    def test_the_launcher_is_there(self):
        for rel in ("tests/support/node_launcher.cpp", "tests/support/redis_fixture.cpp",
                    "tools/nodes/launcher.cpp"):
            self.assertTrue(os.path.exists(os.path.join(ROOT, rel)), rel)


class ThePatternsFindWhatTheyLookFor(unittest.TestCase):
    """What each scanner must catch (the shapes main's tree had before the launcher: redisfix.py's
    Popen of $REDLOCK_TEST_REDIS_SERVER, test_ctypes.py's TLS Popen, capi_test.c's execlp), and
    what it must let pass."""

    def test_python(self):
        self.assertEqual(python_starts(
            'import os, subprocess\n'
            'SERVER = os.environ.get("REDLOCK_TEST_REDIS_SERVER") or "redis-server"\n'
            'p = subprocess.Popen([SERVER, "--port", "1"])\n'), [3])
        self.assertEqual(python_starts(
            'import subprocess\n'
            'proc = subprocess.Popen(\n    ["redis-server", "--port", "0"], cwd="d")\n'), [2])
        self.assertEqual(python_starts('import os\nos.execvp("valkey-server", ["valkey-server"])\n'),
                         [2])
        self.assertEqual(python_starts(
            'import subprocess\n'
            'subprocess.run([CLI, "cluster", "up"])\n'
            'print("redis-server")\n'
            'real = shutil.which("redis-server")\n'
            'f.write("exec -a redis-server %s" % real)\n'), [])

    def test_c(self):
        self.assertEqual(c_starts(
            'int f(void) {\n'
            '  execlp("redis-server", "redis-server", "--port", port, (char*)NULL);\n}\n'), [2])
        self.assertEqual(c_starts(
            'void g() { ::execv(getenv("REDLOCK_TEST_REDIS_SERVER"), argv); }\n'), [1])
        self.assertEqual(c_starts(
            '/* execlp("redis-server") in a comment */\n'
            'int h() { return posix_spawn(&pid, launcher, &fa, NULL, argv, environ); }\n'), [])

    def test_shell(self):
        self.assertEqual(shell_starts('#!/bin/bash\nredis-server --port 1 &\n'), [2])
        self.assertEqual(shell_starts('x=1; "$REDLOCK_TEST_REDIS_SERVER" --port 1\n'), [1])
        self.assertEqual(shell_starts('exec -a redis-server /usr/bin/valkey-server "$@"\n'), [1])
        self.assertEqual(shell_starts('# redis-server is started by the launcher\n'
                                      'export REDLOCK_TEST_REDIS_SERVER=$exe\nexec "$@"\n'), [])


if __name__ == "__main__":
    unittest.main(verbosity=2)
