#include "loopback_server.hpp"

#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/ssl/stream.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>
#include <cctype>
#include <stdexcept>

namespace charge_outbox::acquirer::testing {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace ssl = asio::ssl;
using tcp = asio::ip::tcp;

namespace {

struct ConnectionState {
  tcp::socket* socket = nullptr;  // the lowest layer, while the connection is served
  bool idle = false;              // waiting for the next request
};

std::string Lower(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

}  // namespace

struct LoopbackServer::State {
  State(asio::io_context& io_context, ReplyHandler reply_handler, ssl::context* tls_context)
      : io(io_context), acceptor(io_context, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0)),
        handler(std::move(reply_handler)), tls(tls_context) {}

  asio::io_context& io;
  tcp::acceptor acceptor;
  ReplyHandler handler;
  ssl::context* tls;
  std::vector<ReceivedRequest> requests;
  int accepted = 0;
  std::vector<std::shared_ptr<ConnectionState>> connections;
};

namespace {

void CloseSocket(tcp::socket& socket) {
  boost::system::error_code ignored;
  socket.shutdown(tcp::socket::shutdown_both, ignored);
  socket.close(ignored);
}

template <class Stream>
asio::awaitable<void> Serve(std::shared_ptr<LoopbackServer::State> state, std::shared_ptr<ConnectionState> connection,
                            Stream& stream, tcp::socket& socket, int connection_no) {
  beast::flat_buffer buffer;
  for (;;) {
    http::request<http::string_body> request;
    connection->idle = true;
    const auto [read_ec, read] = co_await http::async_read(stream, buffer, request, asio::as_tuple(asio::use_awaitable));
    connection->idle = false;
    if (read_ec) co_return;

    ReceivedRequest received;
    received.method = std::string(request.method_string());
    received.target = std::string(request.target());
    for (const auto& field : request) received.headers[Lower(std::string(field.name_string()))] = std::string(field.value());
    received.body = request.body();
    received.connection = connection_no;
    state->requests.push_back(received);
    const Reply reply = state->handler(received);

    switch (reply.kind) {
      case Reply::Kind::kRespond:
      case Reply::Kind::kRespondThenClose: {
        http::response<http::string_body> response{static_cast<http::status>(reply.status), 11};
        response.set(http::field::content_type, "application/json");
        for (const auto& [name, value] : reply.headers) response.set(name, value);
        response.body() = reply.body;
        response.keep_alive(reply.kind == Reply::Kind::kRespond);
        response.prepare_payload();
        const auto [write_ec, written] = co_await http::async_write(stream, response, asio::as_tuple(asio::use_awaitable));
        if (write_ec || reply.kind == Reply::Kind::kRespondThenClose) {
          CloseSocket(socket);
          co_return;
        }
        break;
      }
      case Reply::Kind::kCloseWithoutAnswer:
        CloseSocket(socket);
        co_return;
      case Reply::Kind::kHang:
        // Keep reading: the client sends nothing more, so this waits until it gives up and closes.
        break;
      case Reply::Kind::kRaw: {
        co_await asio::async_write(stream, asio::buffer(reply.body), asio::as_tuple(asio::use_awaitable));
        CloseSocket(socket);
        co_return;
      }
    }
  }
}

asio::awaitable<void> HandleConnection(std::shared_ptr<LoopbackServer::State> state, tcp::socket socket,
                                       int connection_no) {
  auto connection = std::make_shared<ConnectionState>();
  state->connections.push_back(connection);
  if (state->tls == nullptr) {
    connection->socket = &socket;
    co_await Serve(state, connection, socket, socket, connection_no);
  } else {
    ssl::stream<tcp::socket> stream(std::move(socket), *state->tls);
    connection->socket = &stream.next_layer();
    const auto [handshake_ec] =
        co_await stream.async_handshake(ssl::stream_base::server, asio::as_tuple(asio::use_awaitable));
    if (!handshake_ec) co_await Serve(state, connection, stream, stream.next_layer(), connection_no);
  }
  connection->socket = nullptr;
}

asio::awaitable<void> AcceptLoop(std::shared_ptr<LoopbackServer::State> state) {
  for (;;) {
    auto [ec, socket] = co_await state->acceptor.async_accept(asio::as_tuple(asio::use_awaitable));
    if (ec) co_return;
    ++state->accepted;
    asio::co_spawn(state->io, HandleConnection(state, std::move(socket), state->accepted), asio::detached);
  }
}

}  // namespace

LoopbackServer::LoopbackServer(asio::io_context& io, ReplyHandler handler, ssl::context* tls)
    : state_(std::make_shared<State>(io, std::move(handler), tls)) {
  asio::co_spawn(io, AcceptLoop(state_), asio::detached);
}

LoopbackServer::~LoopbackServer() {
  boost::system::error_code ignored;
  state_->acceptor.close(ignored);
  for (const auto& connection : state_->connections) {
    if (connection->socket != nullptr) CloseSocket(*connection->socket);
  }
}

unsigned short LoopbackServer::port() const { return state_->acceptor.local_endpoint().port(); }
const std::vector<ReceivedRequest>& LoopbackServer::requests() const { return state_->requests; }
int LoopbackServer::connections_accepted() const { return state_->accepted; }

void LoopbackServer::CloseIdleConnections() {
  for (const auto& connection : state_->connections) {
    if (connection->socket != nullptr && connection->idle) CloseSocket(*connection->socket);
  }
}

unsigned short ClosedLoopbackPort() {
  asio::io_context io;
  tcp::acceptor acceptor(io, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
  const auto port = acceptor.local_endpoint().port();
  acceptor.close();
  return port;
}

namespace {

std::string BioText(BIO* bio) {
  char* data = nullptr;
  const long size = BIO_ctrl(bio, BIO_CTRL_INFO, 0, static_cast<void*>(&data));
  return std::string(data, static_cast<std::size_t>(size));
}

}  // namespace

TestCertificate MakeSelfSignedCertificate(const std::string& subject_alt_names) {
  EVP_PKEY* key = EVP_PKEY_Q_keygen(nullptr, nullptr, "EC", "P-256");
  X509* cert = X509_new();
  if (key == nullptr || cert == nullptr) throw std::runtime_error("OpenSSL: cannot create a key or certificate");
  X509_set_version(cert, 2);
  ASN1_INTEGER_set(X509_get_serialNumber(cert), 1);
  X509_gmtime_adj(X509_getm_notBefore(cert), -3600);
  X509_gmtime_adj(X509_getm_notAfter(cert), 24 * 3600);
  X509_set_pubkey(cert, key);
  X509_NAME* name = X509_get_subject_name(cert);
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, reinterpret_cast<const unsigned char*>("localhost"), -1, -1, 0);
  X509_set_issuer_name(cert, name);
  X509V3_CTX ctx;
  X509V3_set_ctx(&ctx, cert, cert, nullptr, nullptr, 0);
  X509_EXTENSION* san = X509V3_EXT_conf_nid(nullptr, &ctx, NID_subject_alt_name, subject_alt_names.c_str());
  if (san == nullptr) throw std::runtime_error("OpenSSL: cannot build subjectAltName");
  X509_add_ext(cert, san, -1);
  X509_EXTENSION_free(san);
  if (X509_sign(cert, key, EVP_sha256()) == 0) throw std::runtime_error("OpenSSL: cannot sign the certificate");

  TestCertificate result;
  BIO* cert_bio = BIO_new(BIO_s_mem());
  PEM_write_bio_X509(cert_bio, cert);
  result.certificate_pem = BioText(cert_bio);
  BIO_free(cert_bio);
  BIO* key_bio = BIO_new(BIO_s_mem());
  PEM_write_bio_PrivateKey(key_bio, key, nullptr, nullptr, 0, nullptr, nullptr);
  result.private_key_pem = BioText(key_bio);
  BIO_free(key_bio);
  X509_free(cert);
  EVP_PKEY_free(key);
  return result;
}

}  // namespace charge_outbox::acquirer::testing
