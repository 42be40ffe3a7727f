// JSON text for the acquirer's bodies and its log, written by Boost.JSON: a value is built on a
// caller's stack buffer (JsonArena) and serialized straight into the caller's string, so a capture's
// body and log record cost no heap allocation beyond the string they end up in.
#pragma once

#include <boost/json/monotonic_resource.hpp>
#include <boost/json/object.hpp>
#include <boost/json/value.hpp>
#include <cstddef>
#include <string>

namespace charge_outbox::acquirer_sim {

// Memory for one JSON value being built: a stack buffer large enough for a capture (its strings are at
// most 255 characters each), then the heap for anything larger (a list page, the ledger).
class JsonArena {
 public:
  JsonArena() : resource_(buffer_, sizeof buffer_) {}
  JsonArena(const JsonArena&) = delete;
  JsonArena& operator=(const JsonArena&) = delete;

  boost::json::storage_ptr storage() { return &resource_; }
  boost::json::object Object() { return boost::json::object(storage()); }

 private:
  unsigned char buffer_[4096];
  boost::json::monotonic_resource resource_;
};

// Appends `value` as compact JSON text.
void AppendJson(const boost::json::object& value, std::string& out);
std::string JsonText(const boost::json::object& value);

}  // namespace charge_outbox::acquirer_sim
