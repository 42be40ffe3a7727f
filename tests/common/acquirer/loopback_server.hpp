// A scripted HTTP/1.1 server on 127.0.0.1 for transport tests of the acquirer client: it records every
// request and answers each as the test's handler says, including the misbehaviours the client must
// classify (close without answering, never answer, answer garbage). Plain or TLS.
//
// Runs on the test's io_context, on the test's thread; not thread-safe.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/context.hpp>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace charge_outbox::acquirer::testing {

struct ReceivedRequest {
  std::string method;
  std::string target;  // as sent, still percent-encoded
  std::map<std::string, std::string> headers;  // lower-case names
  std::string body;
  int connection = 0;  // 1 for the first connection accepted
};

struct Reply {
  enum class Kind {
    kRespond,             // answer, keep the connection open
    kRespondThenClose,    // answer with Connection: close, then close
    kCloseWithoutAnswer,  // close the connection after reading the request
    kHang,                // never answer; keep the connection open until the server is destroyed
    kRaw,                 // write `body` as raw bytes (not HTTP), then close
  };
  Kind kind = Kind::kRespond;
  int status = 200;
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;

  static Reply Json(int status, std::string body, std::vector<std::pair<std::string, std::string>> headers = {}) {
    return Reply{Kind::kRespond, status, std::move(body), std::move(headers)};
  }
  static Reply Of(Kind kind) { return Reply{kind, 0, {}, {}}; }
};

using ReplyHandler = std::function<Reply(const ReceivedRequest&)>;

class LoopbackServer {
 public:
  // `tls`: serve TLS with this context (certificate loaded); null for plain HTTP.
  LoopbackServer(boost::asio::io_context& io, ReplyHandler handler, boost::asio::ssl::context* tls = nullptr);
  ~LoopbackServer();
  LoopbackServer(const LoopbackServer&) = delete;
  LoopbackServer& operator=(const LoopbackServer&) = delete;

  unsigned short port() const;
  const std::vector<ReceivedRequest>& requests() const;
  int connections_accepted() const;
  // Closes every connection that is waiting for its next request, as a server's idle timeout would.
  void CloseIdleConnections();

  struct State;

 private:
  std::shared_ptr<State> state_;
};

// A port on 127.0.0.1 that was free a moment ago and has no listener now: connecting is refused.
unsigned short ClosedLoopbackPort();

// A self-signed certificate generated at run time, for the names in `subject_alt_names` (OpenSSL syntax).
struct TestCertificate {
  std::string certificate_pem;
  std::string private_key_pem;
};
TestCertificate MakeSelfSignedCertificate(const std::string& subject_alt_names = "DNS:localhost,IP:127.0.0.1");

}  // namespace charge_outbox::acquirer::testing
