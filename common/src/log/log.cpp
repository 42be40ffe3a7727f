#include "charge_outbox/log/log.hpp"

#include <spdlog/details/log_msg.h>
#include <spdlog/formatter.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include "charge_outbox/trace/trace_context.hpp"
#include "charge_outbox/util/time.hpp"

namespace charge_outbox::log {
namespace {

thread_local std::string current_trace_id;

const char* LevelName(spdlog::level::level_enum level) {
  switch (level) {
    case spdlog::level::trace: return "trace";
    case spdlog::level::debug: return "debug";
    case spdlog::level::info: return "info";
    case spdlog::level::warn: return "warn";
    case spdlog::level::err: return "error";
    case spdlog::level::critical: return "critical";
    case spdlog::level::off: return "off";
    case spdlog::level::n_levels: break;
  }
  return "unknown";
}

class JsonFormatter final : public spdlog::formatter {
 public:
  explicit JsonFormatter(std::string component) : component_(std::move(component)) {}

  void format(const spdlog::details::log_msg& msg, spdlog::memory_buf_t& dest) override {
    std::string line;
    line.reserve(128 + msg.payload.size());
    line += R"({"ts":")";
    line += util::FormatRfc3339(msg.time);
    line += R"(","level":")";
    line += LevelName(msg.level);
    line += R"(","component":")";
    AppendJsonEscaped(component_, line);
    line += '"';
    if (!current_trace_id.empty()) {
      line += R"(,"trace_id":")";
      AppendJsonEscaped(current_trace_id, line);
      line += '"';
    }
    line += R"(,"msg":")";
    AppendJsonEscaped(std::string_view(msg.payload.data(), msg.payload.size()), line);
    line += "\"}\n";
    dest.append(line.data(), line.data() + line.size());
  }

  std::unique_ptr<spdlog::formatter> clone() const override {
    return std::make_unique<JsonFormatter>(component_);
  }

 private:
  std::string component_;
};

}  // namespace

void AppendJsonEscaped(std::string_view text, std::string& out) {
  static constexpr char kHex[] = "0123456789abcdef";
  for (const char c : text) {
    const auto u = static_cast<unsigned char>(c);
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (u < 0x20) {
          out += "\\u00";
          out += kHex[u >> 4];
          out += kHex[u & 0xF];
        } else {
          out += c;
        }
    }
  }
}

void Init(std::string_view component, std::string_view level) {
  Init(component, level, std::make_shared<spdlog::sinks::stdout_sink_mt>());
}

void Init(std::string_view component, std::string_view level, std::shared_ptr<spdlog::sinks::sink> sink) {
  spdlog::drop(std::string(component));
  auto logger = std::make_shared<spdlog::logger>(std::string(component), std::move(sink));
  logger->set_formatter(std::make_unique<JsonFormatter>(std::string(component)));
  logger->set_level(spdlog::level::from_str(std::string(level)));
  logger->flush_on(spdlog::level::warn);
  spdlog::set_default_logger(std::move(logger));
}

void Flush() { spdlog::default_logger()->flush(); }

ScopedTraceId::ScopedTraceId(std::string trace_id) : previous_(std::move(current_trace_id)) {
  current_trace_id = std::move(trace_id);
}

ScopedTraceId::~ScopedTraceId() { current_trace_id = std::move(previous_); }

std::string TraceIdOf(std::string_view traceparent) {
  const auto parsed = trace::ParseTraceparent(traceparent);
  return parsed ? parsed->trace_id : std::string();
}

}  // namespace charge_outbox::log
