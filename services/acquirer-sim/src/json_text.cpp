#include "json_text.hpp"

#include <boost/json/serializer.hpp>

namespace charge_outbox::acquirer_sim {

void AppendJson(const boost::json::object& value, std::string& out) {
  boost::json::serializer serializer;
  serializer.reset(&value);
  char chunk[4096];
  while (!serializer.done()) {
    const auto text = serializer.read(chunk);
    out.append(text.data(), text.size());
  }
}

std::string JsonText(const boost::json::object& value) {
  std::string out;
  AppendJson(value, out);
  return out;
}

}  // namespace charge_outbox::acquirer_sim
