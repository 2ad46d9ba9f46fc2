"""The C API through Python ctypes: what a foreign-function user of libredlock.so does.

Loads the built library (REDLOCK_LIBRARY, set by meson), declares the signatures it uses, and
drives real redis-server processes (tests/cli/redisfix.py): binary resource names, contention
between two clients, the per-node record, no quorum, the loss callback running on the library's
own thread, NULL / freed handles, and leader election (the callback forms on library threads).
"""
import ctypes
import os
import re
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "cli"))
from redisfix import Cluster, Server, command, free_port, get  # noqa: E402

LIB_PATH = os.environ.get("REDLOCK_LIBRARY", "libredlock.so.0")

OK, CONTENDED, NO_QUORUM, EXPIRED, NOT_HELD, INVALID, CANCELLED, SHUTDOWN = range(8)
REFUSED = 10  # REDLOCK_E_REFUSED
NO_LEADER = 11  # REDLOCK_E_NO_LEADER (C API version 5)
IDENTITY_MAX = 256  # REDLOCK_IDENTITY_MAX

H = ctypes.c_void_p  # every handle is opaque
LOSS_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int, ctypes.c_char_p)
CAMPAIGN_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int, H, ctypes.c_char_p)
# The id arrives as a pointer and a length (not NUL-terminated).
OBSERVE_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t,
                              ctypes.c_uint64)

SIGNATURES = {
    "redlock_version": (ctypes.c_char_p, []),
    "redlock_strerror": (ctypes.c_char_p, [ctypes.c_int]),
    "redlock_result_new": (ctypes.c_int, [ctypes.POINTER(H)]),
    "redlock_result_free": (ctypes.c_int, [H]),
    "redlock_result_code": (ctypes.c_int, [H]),
    "redlock_result_message": (ctypes.c_char_p, [H]),
    "redlock_result_node_count": (ctypes.c_size_t, [H]),
    "redlock_result_node_name": (ctypes.c_char_p, [H, ctypes.c_size_t]),
    "redlock_result_node_state": (ctypes.c_char_p, [H, ctypes.c_size_t]),
    "redlock_result_node_detail": (ctypes.c_char_p, [H, ctypes.c_size_t]),
    "redlock_result_node_latency_us": (ctypes.c_int64, [H, ctypes.c_size_t]),
    "redlock_options_new": (ctypes.c_int, [ctypes.POINTER(H)]),
    "redlock_options_free": (ctypes.c_int, [H]),
    "redlock_options_set_nodes": (ctypes.c_int, [H, ctypes.c_char_p, ctypes.c_size_t, H]),
    "redlock_options_set_retry": (ctypes.c_int, [H, ctypes.c_int, ctypes.c_uint64, ctypes.c_uint64]),
    "redlock_options_set_node_timeout_ms": (ctypes.c_int, [H, ctypes.c_uint64]),
    "redlock_client_new": (ctypes.c_int, [H, ctypes.POINTER(H), H]),
    "redlock_client_free": (ctypes.c_int, [H]),
    "redlock_acquire_options_new": (ctypes.c_int, [ctypes.POINTER(H)]),
    "redlock_acquire_options_free": (ctypes.c_int, [H]),
    "redlock_acquire_options_set_ttl_ms": (ctypes.c_int, [H, ctypes.c_uint64]),
    "redlock_acquire_options_set_auto_extend": (
        ctypes.c_int, [H, ctypes.c_int, ctypes.c_uint64, LOSS_FN, ctypes.c_void_p]),
    "redlock_acquire": (
        ctypes.c_int, [H, ctypes.c_char_p, ctypes.c_size_t, ctypes.c_uint64, ctypes.POINTER(H), H]),
    "redlock_acquire_ex": (
        ctypes.c_int, [H, ctypes.POINTER(ctypes.c_char_p), ctypes.POINTER(ctypes.c_size_t),
                       ctypes.c_size_t, H, ctypes.POINTER(H), H]),
    "redlock_release": (ctypes.c_int, [H, H]),
    "redlock_lock_free": (ctypes.c_int, [H]),
    "redlock_lock_check": (ctypes.c_int, [H, H]),
    "redlock_lock_token": (ctypes.c_int, [H, ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(ctypes.c_size_t)]),
    "redlock_c_api_version": (ctypes.c_int, []),
    "redlock_options_set_tls": (ctypes.c_int, [H, ctypes.c_int]),
    "redlock_options_set_tls_ca_file": (ctypes.c_int, [H, ctypes.c_char_p, ctypes.c_size_t]),
    "redlock_options_set_tls_server_name": (ctypes.c_int, [H, ctypes.c_char_p, ctypes.c_size_t]),
    "redlock_election_new": (ctypes.c_int, [H, ctypes.c_char_p, ctypes.c_size_t, ctypes.c_char_p,
                                            ctypes.c_size_t, ctypes.POINTER(H), H]),
    "redlock_election_free": (ctypes.c_int, [H]),
    "redlock_campaign": (ctypes.c_int, [H, H, ctypes.POINTER(H), H]),
    "redlock_campaign_async": (ctypes.c_int, [H, H, CAMPAIGN_FN, ctypes.c_void_p, H]),
    "redlock_leader": (ctypes.c_int, [H, ctypes.c_char_p, ctypes.c_size_t, ctypes.POINTER(ctypes.c_size_t),
                                      ctypes.POINTER(ctypes.c_uint64), ctypes.POINTER(ctypes.c_uint64),
                                      ctypes.POINTER(ctypes.c_uint64), H]),
    "redlock_observe": (ctypes.c_int, [H, ctypes.c_uint64, OBSERVE_FN, ctypes.c_void_p, ctypes.POINTER(H), H]),
    "redlock_observation_free": (ctypes.c_int, [H]),
    "redlock_leadership_term": (ctypes.c_int, [H, ctypes.POINTER(ctypes.c_uint64)]),
    "redlock_leadership_check": (ctypes.c_int, [H, H]),
    "redlock_leadership_free": (ctypes.c_int, [H]),
}


def load(path):
    lib = ctypes.CDLL(path)
    for name, (res, args) in SIGNATURES.items():
        fn = getattr(lib, name)
        fn.restype = res
        fn.argtypes = args
    return lib


lib = load(LIB_PATH)


def new(ctor):
    h = H()
    rc = ctor(ctypes.byref(h))
    assert rc == OK, rc
    return h


class Result:
    """The detail record, read through the accessors into Python values."""

    def __init__(self):
        self.h = new(lib.redlock_result_new)

    def close(self):
        lib.redlock_result_free(self.h)

    @property
    def code(self):
        return lib.redlock_result_code(self.h)

    @property
    def message(self):
        return lib.redlock_result_message(self.h).decode()

    def nodes(self):
        return [(lib.redlock_result_node_name(self.h, i).decode(),
                 lib.redlock_result_node_state(self.h, i).decode(),
                 lib.redlock_result_node_detail(self.h, i).decode(),
                 lib.redlock_result_node_latency_us(self.h, i))
                for i in range(lib.redlock_result_node_count(self.h))]


def make_client(nodes):
    opts = new(lib.redlock_options_new)
    try:
        raw = nodes.encode()
        assert lib.redlock_options_set_nodes(opts, raw, len(raw), None) == OK
        assert lib.redlock_options_set_retry(opts, 0, 50, 10) == OK
        assert lib.redlock_options_set_node_timeout_ms(opts, 250) == OK
        client = H()
        rc = lib.redlock_client_new(opts, ctypes.byref(client), None)
        return rc, client
    finally:
        lib.redlock_options_free(opts)


def eventually(pred, limit=2.0):
    """The outcome is decided on the first answers that agree (with three nodes the third may
    still be pending); the remaining nodes get their command a moment later."""
    end = time.time() + limit
    while time.time() < end:
        if pred():
            return True
        time.sleep(0.01)
    return pred()


def decided_by(nodes, state):
    """`state` on a majority of the three nodes; the others still pending."""
    states = [n[1] for n in nodes]
    return len(states) == 3 and states.count(state) >= 2 and set(states) <= {state, "pending"}


def token_of(lock):
    data, size = ctypes.c_void_p(), ctypes.c_size_t()
    assert lib.redlock_lock_token(lock, ctypes.byref(data), ctypes.byref(size)) == OK
    return ctypes.string_at(data, size.value)


class CApiThroughCtypes(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.c = Cluster(3)  # redisfix makes sure each answers from its own process and port
        rc, cls.client = make_client(cls.c.nodes)
        assert rc == OK, rc

    @classmethod
    def tearDownClass(cls):
        lib.redlock_client_free(cls.client)
        cls.c.close()

    def setUp(self):
        self.r = Result()

    def tearDown(self):
        self.r.close()

    def acquire(self, resource, ttl_ms=10000, client="mine"):
        lock = H()
        rc = lib.redlock_acquire(self.client if client == "mine" else client, resource, len(resource), ttl_ms,
                                 ctypes.byref(lock), self.r.h)
        return rc, lock

    def test_version_and_messages(self):
        self.assertRegex(lib.redlock_version().decode(), r"^\d+\.\d+\.\d+")
        self.assertIn(b"held", lib.redlock_strerror(CONTENDED))
        self.assertEqual(lib.redlock_strerror(999), b"unknown redlock error code")

    def test_binary_resource_is_the_key_on_every_server(self):
        res = b"inv\x00oice-42"
        rc, lock = self.acquire(res)
        self.assertEqual(rc, OK, self.r.message)
        tok = token_of(lock)
        self.assertRegex(tok.decode(), r"^[0-9a-f]{40}$")
        # The key is all 11 bytes, not b"inv".
        self.assertTrue(eventually(lambda: self.c.count_with(res, tok.decode()) == 3))
        for s in self.c.servers:
            self.assertIsNone(get(s.port, b"inv"))
        self.assertEqual(lib.redlock_release(lock, self.r.h), OK)
        self.assertTrue(eventually(lambda: self.c.count_with(res) == 0))
        self.assertEqual(lib.redlock_lock_free(lock), OK)

    def test_contended_between_two_clients_with_per_node_record(self):
        rc, other = make_client(self.c.nodes)
        self.assertEqual(rc, OK)
        try:
            rc, mine = self.acquire(b"py-contended")
            self.assertEqual(rc, OK)
            # Decided at a quorum: the third node's SET may land after the other client's (which
            # then wins that node and rolls back; seen in a fresh-clone run). Held everywhere first.
            self.assertEqual(self.c.settled_count(3, "py-contended"), 3)
            rc, theirs = self.acquire(b"py-contended", client=other)
            self.assertEqual(rc, CONTENDED)
            self.assertIsNone(theirs.value)  # NULL on failure
            self.assertEqual(self.r.code, CONTENDED)
            nodes = self.r.nodes()
            self.assertEqual([n[0] for n in nodes], [s.address for s in self.c.servers])
            self.assertTrue(decided_by(nodes, "held-by-other"), nodes)
            self.assertTrue(all(n[3] >= 0 for n in nodes))
            # Once released, the other client gets it.
            self.assertEqual(lib.redlock_lock_free(mine), OK)
            rc, theirs = self.acquire(b"py-contended", client=other)
            self.assertEqual(rc, OK)
            self.assertTrue(decided_by(self.r.nodes(), "ok"), self.r.nodes())
            self.assertEqual(lib.redlock_lock_free(theirs), OK)
        finally:
            lib.redlock_client_free(other)

    def test_no_quorum_names_the_down_nodes(self):
        a = free_port()
        b = free_port()
        while b == a:  # the kernel may hand the same free port out twice in a row
            b = free_port()
        dead = "127.0.0.1:%d,127.0.0.1:%d" % (a, b)
        rc, client = make_client(self.c.servers[0].address + "," + dead)
        self.assertEqual(rc, OK)
        try:
            rc, lock = self.acquire(b"py-noquorum", client=client)
            self.assertEqual(rc, NO_QUORUM, self.r.message)
            states = [n[1] for n in self.r.nodes()]
            self.assertEqual(states.count("down"), 2, self.r.nodes())
            self.assertTrue(eventually(lambda: self.c.count_with("py-noquorum") == 0))  # rolled back
        finally:
            self.assertEqual(lib.redlock_client_free(client), OK)

    def test_loss_callback_runs_once_on_the_library_thread(self):
        seen = []
        lost = threading.Event()

        @LOSS_FN
        def on_lost(user, reason, message):
            seen.append((user, reason, message.decode(), threading.get_ident()))
            lost.set()

        ao = new(lib.redlock_acquire_options_new)
        self.assertEqual(lib.redlock_acquire_options_set_ttl_ms(ao, 1500), OK)
        self.assertEqual(lib.redlock_acquire_options_set_auto_extend(ao, 1, 250, on_lost, 1234), OK)
        res = b"py-watch"
        names = (ctypes.c_char_p * 1)(res)
        lens = (ctypes.c_size_t * 1)(len(res))
        lock = H()
        rc = lib.redlock_acquire_ex(self.client, names, lens, 1, ao, ctypes.byref(lock), self.r.h)
        lib.redlock_acquire_options_free(ao)
        self.assertEqual(rc, OK, self.r.message)
        self.assertFalse(lost.wait(2.0))  # past the ttl: still held, extended
        self.assertEqual(lib.redlock_lock_check(lock, None), OK)
        self.assertTrue(eventually(lambda: self.c.count_with(res, token_of(lock).decode()) == 3))
        for s in self.c.servers:
            command(s.port, "DEL", res)
        self.assertTrue(lost.wait(3.0))
        self.assertEqual(len(seen), 1)
        user, reason, message, thread = seen[0]
        self.assertEqual((user, reason), (1234, NOT_HELD))
        self.assertTrue(message)
        self.assertNotEqual(thread, threading.get_ident())
        self.assertEqual(lib.redlock_lock_check(lock, self.r.h), NOT_HELD)
        self.assertEqual(lib.redlock_lock_free(lock), OK)
        self.assertEqual(len(seen), 1)

    def test_null_and_freed_handles(self):
        self.assertEqual(lib.redlock_lock_free(None), INVALID)
        self.assertEqual(lib.redlock_release(None, None), INVALID)
        rc, lock = self.acquire(b"x", client=None)
        self.assertEqual(rc, INVALID)
        self.assertIn("invalid client handle", self.r.message)
        rc, client = make_client(self.c.nodes)
        self.assertEqual(lib.redlock_client_free(client), OK)
        self.assertEqual(lib.redlock_client_free(client), INVALID)
        rc, lock = self.acquire(b"x", client=client)
        self.assertEqual(rc, INVALID)
        # A bad node list: refused, the message names the bad address.
        opts = new(lib.redlock_options_new)
        bad = b"127.0.0.1:7001,nonsense:port"
        self.assertEqual(lib.redlock_options_set_nodes(opts, bad, len(bad), self.r.h), INVALID)
        self.assertIn("nonsense", self.r.message)
        self.assertEqual(lib.redlock_options_free(opts), OK)
        self.assertEqual(lib.redlock_options_free(opts), INVALID)


class ElectionThroughCtypes(unittest.TestCase):
    """C API version 5 from Python: the callback form of campaign and observe call back on the
    library's threads; a resign hands over with a higher term."""

    @classmethod
    def setUpClass(cls):
        cls.c = Cluster(3)
        cls.clients = []
        for _ in range(2):
            rc, client = make_client(cls.c.nodes)
            assert rc == OK, rc
            cls.clients.append(client)

    @classmethod
    def tearDownClass(cls):
        for client in cls.clients:
            lib.redlock_client_free(client)
        cls.c.close()

    def election(self, client, name, ident):
        e, r = H(), Result()
        self.addCleanup(r.close)
        rc = lib.redlock_election_new(client, name, len(name), ident, len(ident) if ident else 0,
                                      ctypes.byref(e), r.h)
        return rc, e, r

    def term(self, leadership):
        t = ctypes.c_uint64()
        self.assertEqual(lib.redlock_leadership_term(leadership, ctypes.byref(t)), OK)
        return t.value

    def leader(self, e):
        buf = ctypes.create_string_buffer(IDENTITY_MAX)
        n, t = ctypes.c_size_t(), ctypes.c_uint64()
        rc = lib.redlock_leader(e, buf, IDENTITY_MAX, ctypes.byref(n), ctypes.byref(t), None, None, None)
        return rc, buf.raw[:n.value], t.value

    def test_async_campaign_and_observe_on_library_threads(self):
        name = b"py-elect"
        rc, first, _ = self.election(self.clients[0], name, b"py-first")
        self.assertEqual(rc, OK)
        rc, second, _ = self.election(self.clients[1], name, b"py-second")
        self.assertEqual(rc, OK)
        self.addCleanup(lib.redlock_election_free, first)
        self.addCleanup(lib.redlock_election_free, second)

        seen, seen_lock = [], threading.Lock()

        def on_change(_user, code, data, size, term):
            with seen_lock:
                seen.append((code, ctypes.string_at(data, size) if data else None, term,
                             threading.get_ident()))

        observe_fn = OBSERVE_FN(on_change)  # kept alive until the observation is freed
        obs = H()
        self.assertEqual(lib.redlock_observe(first, 100, observe_fn, None, ctypes.byref(obs), None), OK)
        self.assertTrue(eventually(lambda: seen and seen[-1][0] == NO_LEADER))

        calls, done = [], threading.Event()

        def on_campaign(_user, code, leadership, message):
            calls.append((code, leadership, threading.get_ident()))
            done.set()

        campaign_fn = CAMPAIGN_FN(on_campaign)
        leader1 = H()
        self.assertEqual(lib.redlock_campaign(first, None, ctypes.byref(leader1), None), OK)
        t1 = self.term(leader1)
        self.assertEqual(lib.redlock_campaign_async(second, None, campaign_fn, None, None), OK)
        self.assertFalse(done.wait(0.3))  # the first one leads: the second waits
        self.assertEqual(self.leader(second), (OK, b"py-first", t1))

        self.assertEqual(lib.redlock_leadership_free(leader1), OK)  # resigns: hands over
        self.assertTrue(done.wait(5))
        time.sleep(0.1)
        self.assertEqual(len(calls), 1)
        code, leader2, thread = calls[0]
        self.assertEqual(code, OK)
        self.assertNotEqual(thread, threading.get_ident())
        leader2 = H(leader2)
        t2 = self.term(leader2)
        self.assertGreater(t2, t1)
        self.assertEqual(lib.redlock_leadership_check(leader2, None), OK)
        self.assertEqual(self.leader(first), (OK, b"py-second", t2))

        self.assertTrue(eventually(lambda: seen[-1][:3] == (OK, b"py-second", t2), 5))
        lib.redlock_observation_free(obs)
        with seen_lock:
            leaders = [(i, t) for code, i, t, _ in seen if code == OK]
            self.assertEqual(leaders, [(b"py-first", t1), (b"py-second", t2)])
            self.assertTrue(all(th != threading.get_ident() for *_, th in seen))
        self.assertEqual(lib.redlock_leadership_free(leader2), OK)
        self.assertEqual(self.leader(first)[0], NO_LEADER)

    def test_bad_identity_is_named(self):
        rc, e, r = self.election(self.clients[0], b"py-elect-bad", b"x" * (IDENTITY_MAX + 1))
        self.assertEqual(rc, INVALID)
        self.assertIn("257 bytes", r.message)
        self.assertFalse(e)
        rc, e, r = self.election(self.clients[0], b"py-elect-bad", b"")
        self.assertEqual(rc, INVALID)
        self.assertIn("identity is empty", r.message)


class CApiOverTls(unittest.TestCase):
    """C API version 3: a lock on a TLS-only redis-server, certificates made here with openssl."""

    def setUp(self):
        import shutil
        import subprocess
        import tempfile
        if shutil.which("openssl") is None:
            self.skipTest("no openssl CLI")
        self.dir = tempfile.mkdtemp(prefix="redlock-capi-tls-")
        self.addCleanup(shutil.rmtree, self.dir, True)
        d = self.dir

        def openssl(*args):
            subprocess.run(["openssl", *args], cwd=d, check=True, capture_output=True)

        openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                "-keyout", "ca.key", "-out", "ca.crt", "-days", "2", "-subj", "/CN=redlock test CA")
        openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                "-keyout", "s.key", "-out", "s.csr", "-subj", "/CN=localhost")
        with open(os.path.join(d, "ext"), "w") as f:
            f.write("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
        openssl("x509", "-req", "-in", "s.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
                "-out", "s.crt", "-days", "2", "-extfile", "ext")
        # A TLS-only server (no plaintext port), started by the tests' one launcher.
        server = Server(tls=(os.path.join(d, "s.crt"), os.path.join(d, "s.key"),
                             os.path.join(d, "ca.crt")), tls_only=True)
        self.addCleanup(server.close)
        self.port = server.port

    def client(self, ca):
        o = new(lib.redlock_options_new)
        self.addCleanup(lib.redlock_options_free, o)
        nodes = ("127.0.0.1:%d" % self.port).encode()
        self.assertEqual(lib.redlock_options_set_nodes(o, nodes, len(nodes), None), OK)
        self.assertEqual(lib.redlock_options_set_tls(o, 1), OK)
        self.assertEqual(lib.redlock_options_set_tls_ca_file(o, ca, len(ca)), OK)
        c = H()
        r = Result()
        self.addCleanup(r.close)
        rc = lib.redlock_client_new(o, ctypes.byref(c), r.h)
        self.assertEqual(rc, OK, lib.redlock_result_message(r.h))
        self.addCleanup(lib.redlock_client_free, c)
        return c

    def test_a_lock_over_tls(self):
        self.assertGreaterEqual(lib.redlock_c_api_version(), 3)
        c = self.client(os.path.join(self.dir, "ca.crt").encode())
        lock, r = H(), Result()
        self.addCleanup(r.close)
        rc = lib.redlock_acquire(c, b"tls-job", 7, 5000, ctypes.byref(lock), r.h)
        self.assertEqual(rc, OK, lib.redlock_result_message(r.h))
        self.assertEqual(lib.redlock_release(lock, r.h), OK)
        lib.redlock_lock_free(lock)

    def test_an_unknown_ca_is_no_vote_with_the_reason(self):
        # The server's own certificate as the only "CA": it is not a CA, so nothing verifies.
        c = self.client(os.path.join(self.dir, "s.crt").encode())
        lock, r = H(), Result()
        self.addCleanup(r.close)
        rc = lib.redlock_acquire(c, b"tls-job", 7, 5000, ctypes.byref(lock), r.h)
        detail = lib.redlock_result_node_detail(r.h, 0)
        self.assertIn(b"certificate verify failed", detail)
        # Verification failed on the quorum (the only node): refused, not retried (issue 41 item 5).
        self.assertEqual(rc, REFUSED, detail)
        self.assertEqual(lib.redlock_strerror(rc)[:7], b"refused")


if __name__ == "__main__":
    unittest.main(verbosity=2)
