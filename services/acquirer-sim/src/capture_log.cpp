#include "capture_log.hpp"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <boost/json/parse.hpp>
#include <boost/json/value.hpp>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <limits>

#include "json_text.hpp"

namespace charge_outbox::acquirer_sim {
namespace {

namespace json = boost::json;

// Every record opens with its type, merchant and key, then its own members, in the order README.md
// shows; Finish appends it as one line.
json::object Record(JsonArena& arena, std::string_view type, std::string_view merchant,
                    std::string_view idempotency_key) {
  auto record = arena.Object();
  record.reserve(10);
  record.emplace("type", type);
  record.emplace("merchant", merchant);
  record.emplace("idempotency_key", idempotency_key);
  return record;
}

void AddRequest(json::object& record, const CaptureRequest& request) {
  record.emplace("amount", request.amount);
  record.emplace("currency", request.currency);
  record.emplace("reference", request.reference);
  record.emplace("payment_method", request.payment_method);
}

void Finish(const json::object& record, std::string& out) {
  AppendJson(record, out);
  out += '\n';
}

struct Fields {
  const json::object& obj;
  std::string error;

  std::string Text(std::string_view name) {
    const auto* v = obj.if_contains(name);
    if (v == nullptr || !v->is_string()) {
      if (error.empty()) error = "missing string member \"" + std::string(name) + "\"";
      return {};
    }
    return std::string(v->get_string());
  }
  std::int64_t Integer(std::string_view name) {
    const auto* v = obj.if_contains(name);
    if (v == nullptr || !v->is_int64()) {
      if (error.empty()) error = "missing integer member \"" + std::string(name) + "\"";
      return 0;
    }
    return v->get_int64();
  }
  CaptureRequest Request() {
    CaptureRequest r;
    r.amount = Integer("amount");
    r.currency = Text("currency");
    r.reference = Text("reference");
    r.payment_method = Text("payment_method");
    return r;
  }
};

std::string Errno(const std::string& what) { return what + ": " + std::strerror(errno); }

}  // namespace

void AppendCaptureRecord(std::string& out, std::string_view merchant, std::string_view idempotency_key,
                         std::string_view id, const CaptureRequest& request, std::int64_t created_at_us,
                         std::int64_t visible_at_us) {
  JsonArena arena;
  auto record = Record(arena, "capture", merchant, idempotency_key);
  record.emplace("id", id);
  AddRequest(record, request);
  record.emplace("created_at_us", created_at_us);
  record.emplace("visible_at_us", visible_at_us);
  Finish(record, out);
}

void AppendDeclineRecord(std::string& out, std::string_view merchant, std::string_view idempotency_key,
                         const CaptureRequest& request, std::string_view decline_code, std::int64_t created_at_us) {
  JsonArena arena;
  auto record = Record(arena, "decline", merchant, idempotency_key);
  AddRequest(record, request);
  record.emplace("decline_code", decline_code);
  record.emplace("created_at_us", created_at_us);
  Finish(record, out);
}

void AppendVoidRecord(std::string& out, std::string_view merchant, std::string_view idempotency_key,
                      std::string_view capture_id, std::int64_t created_at_us) {
  JsonArena arena;
  auto record = Record(arena, "void", merchant, idempotency_key);
  record.emplace("id", capture_id);
  record.emplace("created_at_us", created_at_us);
  Finish(record, out);
}

void EncodeRecord(const LogRecord& r, std::string& out) {
  switch (r.type) {
    case RecordType::kCapture:
      AppendCaptureRecord(out, r.merchant, r.idempotency_key, r.id, r.request, r.created_at_us, r.visible_at_us);
      return;
    case RecordType::kDecline:
      AppendDeclineRecord(out, r.merchant, r.idempotency_key, r.request, r.decline_code, r.created_at_us);
      return;
    case RecordType::kVoid:
      AppendVoidRecord(out, r.merchant, r.idempotency_key, r.id, r.created_at_us);
      return;
    case RecordType::kPaymentIntent: {
      JsonArena arena;
      auto record = Record(arena, "payment_intent", r.merchant, r.idempotency_key);
      record.emplace("id", r.id);
      AddRequest(record, r.request);
      record.emplace("decline_code", r.decline_code);
      record.emplace("charge", r.charge_id);
      record.emplace("event", r.event_id);
      record.emplace("request", r.request_id);
      record.emplace("created_at_us", r.created_at_us);
      record.emplace("visible_at_us", r.visible_at_us);
      record.emplace("searchable_at_us", r.searchable_at_us);
      Finish(record, out);
      return;
    }
    case RecordType::kRefund: {
      JsonArena arena;
      auto record = Record(arena, "refund", r.merchant, r.idempotency_key);
      record.emplace("id", r.id);
      record.emplace("refund", r.refund_id);
      record.emplace("event", r.event_id);
      record.emplace("request", r.request_id);
      record.emplace("created_at_us", r.created_at_us);
      Finish(record, out);
      return;
    }
    case RecordType::kStripeAnswer: {
      JsonArena arena;
      auto record = Record(arena, "stripe_answer", r.merchant, r.idempotency_key);
      record.emplace("params", r.params);
      record.emplace("status", r.status);
      record.emplace("body", r.body);
      record.emplace("created_at_us", r.created_at_us);
      Finish(record, out);
      return;
    }
  }
}

boost::system::result<LogRecord, std::string> DecodeRecord(std::string_view line) {
  boost::system::error_code ec;
  json::parse_options options;
  options.max_depth = 2;
  const auto value = json::parse(line, ec, {}, options);
  if (ec) return "not JSON: " + ec.message();
  if (!value.is_object()) return std::string("not a JSON object");
  Fields f{value.get_object(), {}};
  LogRecord r;
  const auto type = f.Text("type");
  r.merchant = f.Text("merchant");
  r.idempotency_key = f.Text("idempotency_key");
  r.created_at_us = f.Integer("created_at_us");
  if (type == "capture") {
    r.type = RecordType::kCapture;
    r.id = f.Text("id");
    r.request = f.Request();
    r.visible_at_us = f.Integer("visible_at_us");
  } else if (type == "decline") {
    r.type = RecordType::kDecline;
    r.request = f.Request();
    r.decline_code = f.Text("decline_code");
  } else if (type == "void") {
    r.type = RecordType::kVoid;
    r.id = f.Text("id");
  } else if (type == "payment_intent") {
    r.type = RecordType::kPaymentIntent;
    r.id = f.Text("id");
    r.request = f.Request();
    r.decline_code = f.Text("decline_code");
    r.charge_id = f.Text("charge");
    r.event_id = f.Text("event");
    r.request_id = f.Text("request");
    r.visible_at_us = f.Integer("visible_at_us");
    r.searchable_at_us = f.Integer("searchable_at_us");
  } else if (type == "refund") {
    r.type = RecordType::kRefund;
    r.id = f.Text("id");
    r.refund_id = f.Text("refund");
    r.event_id = f.Text("event");
    r.request_id = f.Text("request");
  } else if (type == "stripe_answer") {
    r.type = RecordType::kStripeAnswer;
    r.params = f.Text("params");
    r.status = f.Integer("status");
    r.body = f.Text("body");
  } else if (f.error.empty()) {
    return "unknown record type \"" + type + "\"";
  }
  if (!f.error.empty()) return f.error;
  return r;
}

CaptureLogFile::CaptureLogFile(const std::string& data_dir) {
  std::error_code ec;
  std::filesystem::create_directories(data_dir, ec);
  if (ec) {
    throw LogError("cannot create data directory \"" + data_dir + "\": " + ec.message() +
                   "; check data.dir (DATA_DIR) and its permissions");
  }
  path_ = (std::filesystem::path(data_dir) / "captures.jsonl").string();
  fd_ = ::open(path_.c_str(), O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd_ < 0) throw LogError(Errno("cannot open " + path_) + "; check data.dir (DATA_DIR) and its permissions");
  if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    const int error = errno;
    ::close(fd_);
    fd_ = -1;
    if (error == EWOULDBLOCK) {
      throw LogError(path_ + " is in use by another acquirer-sim; give each instance its own data.dir");
    }
    errno = error;
    throw LogError(Errno("cannot lock " + path_));
  }
}

CaptureLogFile::~CaptureLogFile() {
  if (fd_ >= 0) ::close(fd_);
}

std::size_t CaptureLogFile::Replay(const std::function<void(const LogRecord&)>& apply) {
  std::string data;
  {
    struct stat st{};
    if (::fstat(fd_, &st) != 0) throw LogError(Errno("cannot stat " + path_));
    data.resize(static_cast<std::size_t>(st.st_size));
    std::size_t done = 0;
    while (done < data.size()) {
      const auto n = ::pread(fd_, data.data() + done, data.size() - done, static_cast<off_t>(done));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) throw LogError(Errno("cannot read " + path_));
      if (n == 0) break;
      done += static_cast<std::size_t>(n);
    }
    data.resize(done);
  }
  std::size_t records = 0;
  std::size_t line_number = 0;
  std::size_t pos = 0;
  while (pos < data.size()) {
    ++line_number;
    const auto end = data.find('\n', pos);
    if (end == std::string::npos) {
      // A record is one write(2); a missing newline means that write was cut short (disk full, power
      // loss). Nobody was answered from it, so dropping it is right; cutting it off keeps later appends
      // from being glued to it.
      spdlog::warn("{}:{}: incomplete last record ({} bytes) removed", path_, line_number, data.size() - pos);
      if (::ftruncate(fd_, static_cast<off_t>(pos)) != 0) throw LogError(Errno("cannot truncate " + path_));
      break;
    }
    const std::string_view line(data.data() + pos, end - pos);
    pos = end + 1;
    if (line.empty()) continue;
    auto record = DecodeRecord(line);
    if (!record) {
      throw LogError(path_ + ":" + std::to_string(line_number) + ": " + record.error() +
                     "; the log was edited or damaged: fix or remove that line, or clear the data directory");
    }
    try {
      apply(*record);
    } catch (const LogError& e) {
      throw LogError(path_ + ":" + std::to_string(line_number) + ": " + e.what());
    }
    ++records;
  }
  return records;
}

bool CaptureLogFile::Append(std::string_view lines) {
  // O_APPEND: each write lands at the end even after Truncate. One write(2) for a record in practice;
  // the loop only matters if the kernel ever returns a short write.
  std::size_t done = 0;
  while (done < lines.size()) {
    const auto n = ::write(fd_, lines.data() + done, lines.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      spdlog::error("{}", Errno("cannot append to " + path_));
      return false;
    }
    done += static_cast<std::size_t>(n);
  }
  return true;
}

bool CaptureLogFile::Truncate() {
  if (::ftruncate(fd_, 0) != 0) {
    spdlog::error("{}", Errno("cannot truncate " + path_));
    return false;
  }
  return true;
}

}  // namespace charge_outbox::acquirer_sim
