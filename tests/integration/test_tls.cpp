// TLS to the nodes: verification, what each kind of failure says, mutual TLS, session
// resumption, and bad files refused before anything is sent. Real redis-server processes with
// certificates the fixture makes (tests/support/tls_fixture.hpp).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <mutex>
#include <vector>

#include "common.hpp"

using namespace itest;
using namespace redlock;
using redlock::test::ServerConfig;
using redlock::test::TlsFixture;

namespace {

// A port whose connections the kernel accepts (its backlog) and nobody ever reads or answers: a
// TLS handshake there never completes. FakeNode would not do: it parses what arrives as RESP and
// closes the connection on bytes it cannot parse, which a ClientHello's random bytes sometimes
// are (seen once under TSan: "the server closed the connection" instead of the timeout).
class MuteListener {
 public:
  MuteListener() : fd_(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) {
    REQUIRE(fd_ >= 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    REQUIRE(::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
    REQUIRE(::listen(fd_, 16) == 0);
    REQUIRE(::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len) == 0);
    port_ = ntohs(a.sin_port);
  }
  ~MuteListener() { ::close(fd_); }
  MuteListener(const MuteListener&) = delete;
  MuteListener& operator=(const MuteListener&) = delete;
  [[nodiscard]] std::string address() const { return "127.0.0.1:" + std::to_string(port_); }

 private:
  int fd_;
  int port_ = 0;
};

// One TLS server (its plaintext port kept for the fixture) with the given certificate.
RedisServer tls_server(const TlsFixture& t, const std::string& auth_clients = "no",
                       std::string cert = {}, std::string key = {}) {
  ServerConfig cfg;
  cfg.tls = t.server_options(auth_clients);
  if (!cert.empty()) {
    cfg.tls->cert_file = std::move(cert);
    cfg.tls->key_file = std::move(key);
  }
  return RedisServer(cfg);
}

Options tls_options(const std::string& csv, const std::string& ca) {
  std::string err;
  auto nodes = parse_node_list(csv, err);
  REQUIRE_MESSAGE(nodes, err);
  Options o;
  o.nodes = std::move(*nodes);
  o.retry_count = 0;
  o.tls.ca_file = ca;
  o.connect_timeout = 1000ms;
  return o;
}

std::string rediss(const RedisServer& s, const std::string& host = "127.0.0.1") {
  return "rediss://" + host + ":" + std::to_string(s.tls_port());
}

// The first node's record of one acquisition.
NodeOutcome first_node(Client& c, const std::string& resource) {
  auto r = c.try_acquire({resource}, ttl_opts(5s));
  REQUIRE(r.nodes.size() >= 1);
  return r.nodes[0];
}

}  // namespace

TEST_CASE("tls: a verified connection takes, extends and releases a lock") {
  TlsFixture t;
  auto s = tls_server(t);
  Client client(tls_options(rediss(s), t.ca_cert()));
  auto r = client.try_acquire({"tls-job"}, ttl_opts(5s));
  REQUIRE_MESSAGE(r, r.message);
  CHECK(s.get("tls-job") == r.lock.token());  // the key is on the server (seen on its plain port)
  CHECK(client.try_extend(r.lock, 10s));
  CHECK(client.try_release(r.lock));
  CHECK_FALSE(s.exists("tls-job"));
  // --tls for every address: the same with redis:// and Options::tls.enabled.
  auto o = tls_options("127.0.0.1:" + std::to_string(s.tls_port()), t.ca_cert());
  o.tls.enabled = true;
  Client all(o);
  auto r2 = all.try_acquire({"tls-job2"}, ttl_opts(5s));
  CHECK_MESSAGE(r2, r2.message);
}

TEST_CASE(
    "tls: each failure is no vote for that node, says what went wrong, within connect_timeout") {
  TlsFixture t;
  auto expect = [](Client& c, const std::string& resource, const std::string& what) {
    const auto start = Clock::now();
    const auto n = first_node(c, resource);
    CHECK(n.state == NodeState::down);
    CHECK_MESSAGE(n.detail.find(what) != std::string::npos, n.detail);
    CHECK(ms_since(start) < 1000 + 1500);  // connect_timeout plus slack, never a hang
  };
  SUBCASE("a CA that did not sign the server's certificate") {
    auto s = tls_server(t);
    Client c(tls_options(rediss(s), t.other_ca_cert()));
    // (the server sends its CA in the chain: OpenSSL then names the untrusted root)
    const auto n = first_node(c, "wrong-ca");
    CHECK(n.state == NodeState::down);
    CHECK_MESSAGE(
        (n.detail.find("certificate verify failed: self-signed certificate in certificate chain") !=
             std::string::npos ||
         n.detail.find("certificate verify failed: unable to get local issuer certificate") !=
             std::string::npos),
        n.detail);
  }
  SUBCASE("an expired certificate") {
    auto s = tls_server(t, "no", t.expired_server_cert(), t.expired_server_key());
    Client c(tls_options(rediss(s), t.ca_cert()));
    expect(c, "expired", "certificate verify failed: certificate has expired");
  }
  SUBCASE("a certificate for another host name") {
    auto s = tls_server(t, "no", t.wrong_host_server_cert(), t.wrong_host_server_key());
    Client c(tls_options(rediss(s), t.ca_cert()));
    expect(c, "wrong-host", "certificate verify failed: IP address mismatch");
    Client by_name(tls_options(rediss(s, "localhost"), t.ca_cert()));
    expect(by_name, "wrong-host2", "certificate verify failed: hostname mismatch");
  }
  SUBCASE("a TLS client against a plaintext port") {
    RedisServer plain;
    Client c(tls_options("rediss://127.0.0.1:" + std::to_string(plain.port()), t.ca_cert()));
    // (Redis reads the ClientHello as the start of a command and waits for the rest)
    expect(c, "tls-to-plain", "in the TLS handshake: does the server speak TLS on this port?");
  }
  SUBCASE("a plaintext client against a TLS port") {
    auto s = tls_server(t);
    Options o = tls_options("127.0.0.1:" + std::to_string(s.tls_port()), t.ca_cert());
    Client c(o);
    const auto n = first_node(c, "plain-to-tls");
    CHECK(n.state != NodeState::ok);
    CHECK_FALSE(s.exists("plain-to-tls"));
  }
  SUBCASE("a server that requires a client certificate and gets none") {
    auto s = tls_server(t, "yes");
    Client c(tls_options(rediss(s), t.ca_cert()));
    const auto n = first_node(c, "no-client-cert");
    CHECK(n.state != NodeState::ok);
    CHECK_MESSAGE(n.detail.find("certificate required") != std::string::npos, n.detail);
    // With one: mutual TLS works.
    auto o = tls_options(rediss(s), t.ca_cert());
    o.tls.cert_file = t.client_cert();
    o.tls.key_file = t.client_key();
    Client mutual(o);
    auto r = mutual.try_acquire({"mutual"}, ttl_opts(5s));
    CHECK_MESSAGE(r, r.message);
    // A client certificate from another CA is refused by the server.
    o.tls.cert_file = t.other_client_cert();
    o.tls.key_file = t.other_client_key();
    Client stranger(o);
    CHECK(first_node(stranger, "stranger").state != NodeState::ok);
  }
  SUBCASE("a handshake that never completes (a node that accepts and says nothing)") {
    MuteListener silent;
    Client c(tls_options("rediss://" + silent.address(), t.ca_cert()));
    expect(c, "silent", "connect timeout after 1000 ms (in the TLS handshake");
  }
}

TEST_CASE("tls: per-address settings: SNI name, its own CA, insecure") {
  TlsFixture t;
  auto s = tls_server(t);
  const std::string p = std::to_string(s.tls_port());
  // The certificate names 127.0.0.1 and localhost: sni=localhost is checked instead of the IP.
  Client named(tls_options("rediss://127.0.0.1:" + p + "?sni=localhost", t.ca_cert()));
  CHECK(first_node(named, "sni-ok").state == NodeState::ok);
  Client wrong(tls_options("rediss://127.0.0.1:" + p + "?sni=wrong.example", t.ca_cert()));
  CHECK(first_node(wrong, "sni-wrong").detail.find("hostname mismatch") != std::string::npos);
  // The address's CA replaces the client's (here a wrong one).
  Client own_ca(
      tls_options("rediss://127.0.0.1:" + p + "?cacert=" + t.ca_cert(), t.other_ca_cert()));
  CHECK(first_node(own_ca, "own-ca").state == NodeState::ok);
  // insecure: no verification at all (a wrong CA is accepted).
  Client insecure(tls_options("rediss://127.0.0.1:" + p + "?insecure", t.other_ca_cert()));
  CHECK(first_node(insecure, "insecure").state == NodeState::ok);
  auto o = tls_options("rediss://127.0.0.1:" + p, t.other_ca_cert());
  o.tls.insecure_skip_verify = true;
  Client insecure_all(o);
  CHECK(first_node(insecure_all, "insecure-all").state == NodeState::ok);
}

TEST_CASE(
    "tls: bad certificate and key files are refused before anything is sent, naming the file") {
  TlsFixture t;
  auto refused = [&](Options o, const std::string& file) {
    o.nodes = *parse_node_list("rediss://127.0.0.1:1", *std::make_unique<std::string>());
    try {
      Client c(o);
      FAIL("accepted " << file);
    } catch (const std::invalid_argument& e) {
      const std::string what = e.what();
      CHECK_MESSAGE(what.find(file) != std::string::npos, what);
      CHECK(what.find("BEGIN") == std::string::npos);  // never the file's contents
    }
  };
  Options o;
  o.tls.ca_file = t.missing_file();
  refused(o, t.missing_file());
  o.tls.ca_file = t.malformed_cert();
  refused(o, t.malformed_cert());
  o.tls.ca_file = t.directory_path();
  refused(o, t.directory_path());
  o = Options{};
  o.tls.ca_dir = t.ca_cert();  // a file where a directory belongs
  refused(o, t.ca_cert());
  o = Options{};
  o.tls.ca_file = t.ca_cert();
  o.tls.cert_file = t.malformed_cert();
  o.tls.key_file = t.client_key();
  refused(o, t.malformed_cert());
  o.tls.cert_file = t.client_cert();
  o.tls.key_file = t.malformed_key();
  refused(o, t.malformed_key());
  o.tls.key_file = t.other_client_key();  // does not match the certificate
  refused(o, t.other_client_key());
  o.tls.key_file.clear();
  refused(o, t.client_cert());  // a certificate without its key
  if (t.unreadable_file_is_unreadable()) {
    o = Options{};
    o.tls.ca_file = t.unreadable_file();
    refused(o, t.unreadable_file());
  }
}

TEST_CASE("tls: a reconnect resumes the TLS session") {
  TlsFixture t;
  auto s = tls_server(t);
  std::mutex mu;
  std::vector<std::string> log;
  auto o = tls_options(rediss(s), t.ca_cert());
  o.reconnect_min = 10ms;
  o.logger = [&](LogLevel, std::string_view m) {
    std::lock_guard<std::mutex> g(mu);
    log.emplace_back(m);
  };
  Client client(o);
  REQUIRE(client.try_acquire({"resume-1"}, ttl_opts(5s)));
  // Drop the client's connection from the server side; the next call reconnects.
  (void)s.command({"CLIENT", "KILL", "TYPE", "normal"});
  auto count = [&](const char* what) {
    std::lock_guard<std::mutex> g(mu);
    int n = 0;
    for (const auto& l : log) n += l.find(what) != std::string::npos;
    return n;
  };
  REQUIRE(eventually(
      [&] {
        (void)client.try_acquire({"resume-" + std::to_string(rand())}, ttl_opts(5s));
        return count("connected over TLS") >= 2;
      },
      5000ms));
  CHECK_MESSAGE(count("session resumed") >= 1, "the reconnect made a full handshake");
}
