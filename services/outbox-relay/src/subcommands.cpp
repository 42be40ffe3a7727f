#include "subcommands.hpp"

#include <boost/json/serialize.hpp>
#include <boost/json/value.hpp>
#include <iostream>

#include "charge_outbox/outbox/outbox_store.hpp"
#include "charge_outbox/util/operator_text.hpp"

namespace charge_outbox::outbox_relay {
namespace {

int Failed(const outbox::DbError& error) {
  std::cerr << "database " << db::ToString(error.code) << ": " << error.detail << "\n";
  return 1;
}

int Usage() {
  std::cerr << kUsage;
  return 2;
}

bool LooksLikeUuid(const std::string& s) {
  if (s.size() != 36) return false;
  for (std::size_t i = 0; i < s.size(); ++i) {
    const bool dash = i == 8 || i == 13 || i == 18 || i == 23;
    if (dash ? s[i] != '-' : !std::isxdigit(static_cast<unsigned char>(s[i]))) return false;
  }
  return true;
}

// `parked retry|skip ID --by NAME --reason TEXT`: who and why go on record with the change.
int Change(outbox::OutboxAdmin& admin, const std::vector<std::string>& args) {
  const auto& verb = args[1];
  const auto& id = args[2];
  if (!LooksLikeUuid(id)) {
    std::cerr << "not an event id (a uuid): " << id.substr(0, 80) << "\n";
    return 2;
  }
  outbox::OperatorNote note;
  bool by_seen = false, reason_seen = false;
  for (std::size_t i = 3; i < args.size(); i += 2) {
    if (i + 1 >= args.size() || (args[i] != "--by" && args[i] != "--reason")) return Usage();
    const bool by = args[i] == "--by";
    if (const auto problem = util::OperatorTextProblem(args[i + 1], by ? util::kMaxOperatorName
                                                                         : util::kMaxOperatorReason)) {
      std::cerr << args[i] << " " << *problem << "\n";
      return 2;
    }
    (by ? note.operator_name : note.reason) = args[i + 1];
    (by ? by_seen : reason_seen) = true;
  }
  if (!by_seen || !reason_seen) {
    std::cerr << "parked " << verb << " needs --by NAME and --reason TEXT: who acts on an event, and why, is on "
              << "record (operator_actions)\n";
    return 2;
  }
  auto result = verb == "retry" ? admin.RetryParked(id, note) : admin.SkipParked(id, note);
  if (!result) return Failed(result.error());
  switch (*result) {
    case outbox::ParkedChange::kDone:
      std::cout << (verb == "retry" ? "unparked " : "skipped ") << id << "\n";
      return 0;
    case outbox::ParkedChange::kNotParked:
      std::cerr << "no parked, unpublished event has id " << id << " (see `outbox-relay parked list`)\n";
      return 1;
  }
  return 1;
}

}  // namespace

bool IsSubcommand(const std::vector<std::string>& args) { return !args.empty(); }

int RunSubcommand(const RelayConfig& config, const std::vector<std::string>& args) {
  auto admin = outbox::MakePgOutboxAdmin(config.database_url, "outbox-relay-cli", config.database);
  if (args[0] == "parked" && args.size() >= 2) {
    if (args[1] == "list" && args.size() <= 3) {
      int limit = 100;
      if (args.size() == 3) {
        try {
          limit = std::stoi(args[2]);
        } catch (const std::exception&) {
          return Usage();
        }
        if (limit < 1) return Usage();
      }
      auto parked = admin->ListParked(limit);
      if (!parked) return Failed(parked.error());
      for (const auto& p : *parked) {
        boost::json::object o{{"id", p.id},
                              {"aggregateid", p.aggregateid},
                              {"type", p.type},
                              {"sequence", p.sequence},
                              {"created_at", p.created_at},
                              {"parked_at", p.parked_at},
                              {"payload_bytes", p.payload_bytes},
                              {"error", p.error}};
        std::cout << boost::json::serialize(o) << "\n";
      }
      return 0;
    }
    if ((args[1] == "retry" || args[1] == "skip") && args.size() >= 3) return Change(*admin, args);
    return Usage();
  }
  if (args[0] == "retention" && args.size() == 1) {
    auto report = admin->RunRetention(config.retention);
    if (!report) return Failed(report.error());
    const auto names = [](const std::vector<std::string>& parts) {
      boost::json::array out;
      for (const auto& p : parts) out.emplace_back(p);
      return out;
    };
    boost::json::object o{{"skipped", report->skipped},
                          {"partitions_created", report->partitions_created},
                          {"moved_to_history", names(report->moved_to_history)},
                          {"dropped", names(report->dropped)},
                          {"kept_unpublished", names(report->kept_unpublished)},
                          {"trimmed_ahead", names(report->trimmed_ahead)},
                          {"failed", names(report->failed)},
                          {"default_rows_deleted", report->default_rows_deleted}};
    std::cout << boost::json::serialize(o) << "\n";
    return 0;
  }
  return Usage();
}

}  // namespace charge_outbox::outbox_relay
