#include "db/pg_pool.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "charge_outbox/db/database.hpp"

namespace charge_outbox::db {

PgPool::PgPool(std::string database_url, DatabaseOptions options)
    : url_(ConnectionString(database_url, options.application_name, options.connection)), options_(std::move(options)) {
  workers_.reserve(options_.connections);
  for (std::size_t i = 0; i < options_.connections; ++i) workers_.emplace_back([this] { WorkerLoop(); });
}

PgPool::~PgPool() { Close(); }

void PgPool::Close() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  for (auto& w : workers_) {
    if (w.joinable()) w.join();
  }
}

std::size_t PgPool::queued() const {
  std::lock_guard lock(mutex_);
  return queue_.size();
}

void PgPool::Submit(Task task, std::span<const Statement> statements) {
  bool refused = false;
  {
    std::lock_guard lock(mutex_);
    if (queue_.size() >= options_.max_queued || stopping_) {
      refused = true;
    } else {
      queue_.push_back(
          {std::move(task), CallDeadlines::Clock::now() + options_.connection.call_timeout, statements});
    }
  }
  if (refused) {
    task->Run(nullptr, std::make_exception_ptr(PoolOverloaded()));
    return;
  }
  wake_.notify_one();
}

void PgPool::WorkerLoop() {
  std::optional<pqxx::connection> conn;
  // The statement arrays declared on `conn` (libpqxx prepares each lazily, at its first use).
  std::vector<const Statement*> declared;
  while (true) {
    Queued job;
    {
      std::unique_lock lock(mutex_);
      wake_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping and drained
      job = std::move(queue_.front());
      queue_.pop_front();
    }
    auto& task = job.task;
    if (CallDeadlines::Clock::now() >= job.deadline) {
      // Its caller's deadline passed while every connection was busy (or hung): nothing was sent.
      task->Run(nullptr, std::make_exception_ptr(PoolOverloaded("no database connection free within database.call_timeout")));
      continue;
    }
    if (!conn.has_value() || !conn->is_open()) {
      try {
        conn.reset();
        declared.clear();
        conn.emplace(url_);  // bounded by connect_timeout
        // Never reconnected behind our back inside a job: the deadline watches this connection's socket.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
        conn->inhibit_reactivation(true);
#pragma GCC diagnostic pop
      } catch (...) {
        conn.reset();
        task->Run(nullptr, std::current_exception());
        continue;
      }
    }
    if (!job.statements.empty() && std::ranges::find(declared, job.statements.data()) == declared.end()) {
      try {
        for (const auto& [name, sql] : job.statements) conn->prepare(name, sql);
      } catch (...) {
        conn.reset();
        task->Run(nullptr, std::current_exception());
        continue;
      }
      declared.push_back(job.statements.data());
    }
    bool expired = false;
    try {
      const auto armed = deadlines_.Arm(conn->sock(), job.deadline);
      task->Run(&*conn, nullptr);
      expired = armed.expired();
    } catch (const std::exception& e) {
      // Tasks deliver their own failures; reaching here means a completion handler threw.
      spdlog::error("database job completion failed: {}", e.what());
    }
    if (expired) {
      spdlog::warn("a database call had no answer within database.call_timeout ({}ms): its connection was dropped",
                   options_.connection.call_timeout.count());
      conn.reset();
    }
    // A job that lost the server leaves a connection that will never work again; reopen next time.
    if (conn.has_value() && !conn->is_open()) conn.reset();
  }
}

}  // namespace charge_outbox::db
