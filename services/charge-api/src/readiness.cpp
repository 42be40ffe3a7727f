#include "readiness.hpp"

#include "api_responses.hpp"

namespace charge_outbox::charge_api {

namespace asio = boost::asio;
using http::Status;

Readiness::Readiness(db::Database& database, int schema_version, std::chrono::milliseconds reuse_for, Clock clock)
    : database_(database), schema_version_(schema_version), reuse_for_(reuse_for), clock_(std::move(clock)) {}

Readiness::Answer Readiness::Judge(const db::DbResult<int>& version) const {
  if (!version) return {false, "database unreachable"};
  if (*version < schema_version_) {
    return {false, "schema at version " + std::to_string(*version) + ", this build needs " +
                       std::to_string(schema_version_)};
  }
  return {true, ""};
}

asio::awaitable<http::Response> Readiness::Check() {
  std::optional<Answer> answer;
  {
    std::lock_guard lock(mutex_);
    if (last_ && (asking_ || clock_() - answered_ < reuse_for_)) answer = last_;
    else asking_ = true;
  }
  if (!answer) {
    struct Done {
      Readiness* self;
      ~Done() {
        std::lock_guard lock(self->mutex_);
        self->asking_ = false;
      }
    } done{this};
    const auto version = co_await database_.SchemaVersion();
    answer = Judge(version);
    std::lock_guard lock(mutex_);
    last_ = answer;
    answered_ = clock_();
  }
  if (!answer->ready) {
    boost::json::object type;
    type["type"] = ProblemType("not-ready");
    auto not_ready = http::ProblemJson(Status::service_unavailable, "Not ready", answer->detail, type);
    co_return not_ready;
  }
  co_return http::JsonResponse(Status::ok, std::string(R"({"status":"ready"})"));
}

}  // namespace charge_outbox::charge_api
