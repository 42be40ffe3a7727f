// PgPool: a fixed set of PostgreSQL connections, each owned by one worker thread, that Asio coroutines
// await without blocking their I/O thread. Internal to common/ (it exposes libpqxx); the stores built
// on it are the public API.
//
// Why threads and not libpq's async API: libpqxx 6 (Debian 12) is blocking, and a dedicated thread per
// connection keeps every statement in one well-tested library while the I/O threads stay free. The
// cost is one hand-off per job, small next to a round trip to the server.
//
// Thread safety: Run() may be called from any thread. Each job runs on exactly one worker, with that
// worker's connection, never concurrently with another job on the same connection.
#pragma once

#include <boost/asio/associated_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <pqxx/pqxx>

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <exception>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "charge_outbox/db/database.hpp"
#include "db/call_deadline.hpp"
#include "db/statement.hpp"

namespace charge_outbox::db {


// The pool refused the job because its queue is full; nothing was sent to the database.
class PoolOverloaded : public std::runtime_error {
 public:
  PoolOverloaded() : std::runtime_error("database pool queue is full") {}
  explicit PoolOverloaded(const std::string& why) : std::runtime_error(why) {}
};

class PgPool {
 public:
  PgPool(std::string database_url, DatabaseOptions options);
  ~PgPool();  // Close()

  // Finishes the jobs queued and running (each within its call deadline), then joins the workers; a job
  // submitted from then on is refused (PoolOverloaded). Idempotent. A daemon closes its pools while the
  // executors their jobs resume on still exist, so no completion lands in a destroyed one.
  void Close();
  PgPool(const PgPool&) = delete;
  PgPool& operator=(const PgPool&) = delete;

  // Runs `job(connection)` on a worker and resumes the awaiting coroutine on its own executor with the
  // result, or rethrows what the job threw (pqxx::broken_connection when the server is unreachable).
  // A connection that broke is dropped and reopened for the next job.
  template <typename Job>
  boost::asio::awaitable<std::invoke_result_t<Job&, pqxx::connection&>> Run(Job job);

  // The same, with `statements` (an array that lives as long as the program: a store's constants) declared
  // on the connection before the job runs: once per connection, not per job, since comparing a dozen SQL
  // texts with the ones already declared cost a charge-api job more than its own conversions.
  template <typename Job>
  boost::asio::awaitable<std::invoke_result_t<Job&, pqxx::connection&>> Run(std::span<const Statement> statements,
                                                                           Job job);

  // Blocking variant for code that owns its thread (start-up checks, batch processes, tests).
  template <typename Job>
  std::invoke_result_t<Job&, pqxx::connection&> RunSync(Job job);

  std::size_t queued() const;

 private:
  // A move-only job (the coroutine's completion handler cannot be copied, so no std::function).
  struct TaskBase {
    virtual ~TaskBase() = default;
    virtual void Run(pqxx::connection* conn, std::exception_ptr failure) = 0;
  };
  template <typename F>
  struct TaskOf final : TaskBase {
    explicit TaskOf(F f) : fn(std::move(f)) {}
    void Run(pqxx::connection* conn, std::exception_ptr failure) override { fn(conn, failure); }
    F fn;
  };
  using Task = std::unique_ptr<TaskBase>;
  template <typename F>
  static Task MakeTask(F f) {
    return std::make_unique<TaskOf<F>>(std::move(f));
  }
  struct Queued {
    Task task;
    CallDeadlines::Clock::time_point deadline;  // call_timeout after submission
    std::span<const Statement> statements;
  };
  void Submit(Task task, std::span<const Statement> statements = {});
  void WorkerLoop();

  std::string url_;
  DatabaseOptions options_;
  CallDeadlines deadlines_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<Queued> queue_;
  bool stopping_ = false;
  std::vector<std::thread> workers_;
};

template <typename Job>
boost::asio::awaitable<std::invoke_result_t<Job&, pqxx::connection&>> PgPool::Run(Job job) {
  co_return co_await Run(std::span<const Statement>{}, std::move(job));
}

template <typename Job>
boost::asio::awaitable<std::invoke_result_t<Job&, pqxx::connection&>> PgPool::Run(
    std::span<const Statement> statements, Job job) {
  using Result = std::invoke_result_t<Job&, pqxx::connection&>;
  if constexpr (std::is_void_v<Result>) {
    co_await Run(statements, [job = std::move(job)](pqxx::connection& c) mutable {
      job(c);
      return true;
    });
    co_return;
  } else {
    auto initiate = [this, statements, job = std::move(job)](auto handler) mutable {
      Submit(MakeTask([job = std::move(job), handler = std::move(handler)](pqxx::connection* conn,
                                                                             std::exception_ptr failure) mutable {
        std::optional<Result> result;
        if (!failure) {
          try {
            result.emplace(job(*conn));
          } catch (...) {
            failure = std::current_exception();
          }
        }
        auto executor = boost::asio::get_associated_executor(handler);
        boost::asio::dispatch(executor, [handler = std::move(handler), failure, result = std::move(result)]() mutable {
          std::move(handler)(failure, std::move(result));
        });
      }), statements);
    };
    auto result = co_await boost::asio::async_initiate<const boost::asio::use_awaitable_t<>&,
                                                       void(std::exception_ptr, std::optional<Result>)>(
        std::move(initiate), boost::asio::use_awaitable);
    co_return std::move(*result);
  }
}

template <typename Job>
std::invoke_result_t<Job&, pqxx::connection&> PgPool::RunSync(Job job) {
  using Result = std::invoke_result_t<Job&, pqxx::connection&>;
  std::promise<std::conditional_t<std::is_void_v<Result>, bool, Result>> promise;
  auto future = promise.get_future();
  Submit(MakeTask([&job, &promise](pqxx::connection* conn, std::exception_ptr failure) {
    if (failure) {
      promise.set_exception(failure);
      return;
    }
    try {
      if constexpr (std::is_void_v<Result>) {
        job(*conn);
        promise.set_value(true);
      } else {
        promise.set_value(job(*conn));
      }
    } catch (...) {
      promise.set_exception(std::current_exception());
    }
  }));
  if constexpr (std::is_void_v<Result>) {
    future.get();
  } else {
    return future.get();
  }
}

}  // namespace charge_outbox::db
