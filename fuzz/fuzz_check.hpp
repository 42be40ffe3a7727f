// What every target shares: the input as bytes, a property check that is a finding when it fails, and
// feeding bytes to a Beast parser as a connection's reads would.
#pragma once

#include <boost/asio/buffer.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/parser.hpp>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>

namespace charge_outbox::fuzz {

inline std::string_view Bytes(const std::uint8_t* data, std::size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

// A property the code promises broke on this input: libFuzzer saves the input as a crash artifact.
[[noreturn]] inline void Finding(const char* what, const char* file, int line) {
  std::fprintf(stderr, "fuzz finding at %s:%d: %s\n", file, line, what);
  std::abort();
}
#define FUZZ_CHECK(condition) \
  ((condition) ? static_cast<void>(0) : ::charge_outbox::fuzz::Finding(#condition, __FILE__, __LINE__))

// Feeds the whole input to `parser`, then the end of the stream, as Beast's own read does with a
// connection that sent these bytes and closed: after need_more it offers more bytes or the end, never the
// same bytes again (Beast asserts on that). True when a complete message was parsed; any parse error (a
// limit included) is false.
template <bool isRequest, class Body>
bool ParseWhole(boost::beast::http::parser<isRequest, Body>& parser, std::string_view bytes) {
  namespace bhttp = boost::beast::http;
  parser.eager(true);
  // A connection closed before its first byte is no message (the server sees end_of_stream, and Beast
  // asserts that put_eof follows some input).
  if (bytes.empty()) return false;
  boost::beast::error_code ec;
  while (!parser.is_done()) {
    std::size_t used = 0;
    if (!bytes.empty()) {
      used = parser.put(boost::asio::const_buffer(bytes.data(), bytes.size()), ec);
      bytes.remove_prefix(used);
    }
    if (bytes.empty() || ec == bhttp::error::need_more || used == 0) {
      if (ec && ec != bhttp::error::need_more) return false;
      if (parser.is_done()) return true;
      ec = {};
      parser.put_eof(ec);  // nothing more will come
      return !ec && parser.is_done();
    }
    if (ec) return false;
  }
  return true;
}

}  // namespace charge_outbox::fuzz
