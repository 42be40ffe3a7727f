#include "connection.hpp"

namespace charge_outbox::acquirer::detail {

void Connection::Close() {
  boost::system::error_code ignored;
  Tcp().socket().shutdown(boost::asio::ip::tcp::socket::shutdown_both, ignored);
  Tcp().close();
}

TransportResult Failure(TransportStatus status, std::string detail, bool reused) {
  TransportResult result;
  result.status = status;
  result.detail = std::move(detail);
  result.reused_connection = reused;
  return result;
}

}  // namespace charge_outbox::acquirer::detail
