#include "charge_outbox/app/admin_port.hpp"

#include <boost/beast/http/field.hpp>
#include <boost/json/value.hpp>

namespace charge_outbox::app {
namespace {

namespace bhttp = boost::beast::http;
using http::Status;

http::Response Probe(const ProbeAnswer& answer) {
  return http::JsonResponse(answer.ok ? Status::ok : Status::service_unavailable,
                            boost::json::value{{"status", answer.status}});
}

}  // namespace

ReusedProbe::ReusedProbe(Check check, std::chrono::milliseconds reuse_for, Now now)
    : check_(std::move(check)), reuse_for_(reuse_for), now_(std::move(now)) {}

boost::asio::awaitable<ProbeAnswer> ReusedProbe::operator()() {
  {
    std::lock_guard lock(mutex_);
    const bool fresh = last_ && now_() - checked_at_ < reuse_for_;
    if (last_ && (fresh || checking_)) co_return *last_;
    checking_ = true;
  }
  // Cleared however the check ends (an exception, a cancelled probe), or no probe would ever ask again.
  struct Checking {
    ReusedProbe& self;
    ~Checking() {
      std::lock_guard lock(self.mutex_);
      self.checking_ = false;
    }
  } checking{*this};
  auto answer = co_await check_();
  std::lock_guard lock(mutex_);
  last_ = answer;
  checked_at_ = now_();
  co_return answer;
}

boost::asio::awaitable<http::Reply> AnswerAdmin(http::Request request, metrics::Registry& registry,
                                                const AdminChecks& checks) {
  const std::string path(request.target());
  http::Reply reply;
  if ((path == "/metrics" || path == "/healthz" || path == "/readyz") && request.method() != bhttp::verb::get) {
    reply.response = http::ProblemJson(Status::method_not_allowed, "Method Not Allowed", "Allowed: GET");
    reply.response.set(bhttp::field::allow, "GET");
  } else if (path == "/metrics") {
    reply.response.result(Status::ok);
    reply.response.set(bhttp::field::content_type, metrics::kTextContentType);
    reply.response.body() = metrics::RenderText(registry);
  } else if (path == "/healthz") {
    reply.response = Probe(checks.live());
  } else if (path == "/readyz") {
    const auto ready = co_await checks.ready();
    reply.response = Probe(ready);
  } else {
    reply.response = http::ProblemJson(Status::not_found, "Not Found", "no such path");
  }
  co_return reply;
}

}  // namespace charge_outbox::app
