// The capture log's record format, and the file's replay rules (a torn last line is cut off, a damaged
// middle line stops the start-up). The file cases use a private temporary directory, nothing else.
#include "capture_log.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "test_env.hpp"

namespace charge_outbox::acquirer_sim {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

LogRecord SampleCapture() {
  return {RecordType::kCapture, "m_1", "key \"quoted\" \\ and\nnewline", "cap_abc",
          {25000, "BRL", "ch_1", "pm_tok_visa"}, {}, 1'800'000'000'123'456, 1'800'000'001'123'456};
}

std::string Encode(const LogRecord& record) {
  std::string line;
  EncodeRecord(record, line);
  return line;
}

TEST(LogRecord, EachTypeRoundTrips) {
  const LogRecord decline{RecordType::kDecline, "m_2", "k2", {}, {1, "USD", "ch_2", "pm_tok_declined"},
                          "card_declined", 5, 0};
  const LogRecord void_record{RecordType::kVoid, "m_1", "v1", "cap_abc", {}, {}, 7, 0};
  for (const auto& record : {SampleCapture(), decline, void_record}) {
    const auto line = Encode(record);
    ASSERT_EQ(line.back(), '\n');
    EXPECT_EQ(line.find('\n'), line.size() - 1) << "one record, one line";
    const auto decoded = DecodeRecord(std::string_view(line).substr(0, line.size() - 1));
    ASSERT_TRUE(decoded.has_value()) << decoded.error();
    EXPECT_EQ(*decoded, record);
  }
}

TEST(LogRecord, TheFormatIsStable) {
  const LogRecord void_record{RecordType::kVoid, "m_1", "v1", "cap_abc", {}, {}, 7, 0};
  EXPECT_EQ(Encode(void_record),
            "{\"type\":\"void\",\"merchant\":\"m_1\",\"idempotency_key\":\"v1\",\"id\":\"cap_abc\",\"created_at_us\":7}\n");
}

TEST(LogRecord, DecodeRejectsDamagedLines) {
  EXPECT_THAT(DecodeRecord("{\"type\":\"capture\"").error(), HasSubstr("not JSON"));
  EXPECT_THAT(DecodeRecord("[]").error(), HasSubstr("not a JSON object"));
  EXPECT_THAT(DecodeRecord(R"({"type":"chargeback","merchant":"m","idempotency_key":"k","created_at_us":1})").error(),
              HasSubstr("unknown record type"));
  EXPECT_THAT(DecodeRecord(R"({"type":"void","merchant":"m","idempotency_key":"k","created_at_us":1})").error(),
              HasSubstr("\"id\""));
  EXPECT_THAT(DecodeRecord(R"({"type":"void","merchant":"m","idempotency_key":"k","id":"c","created_at_us":"1"})").error(),
              HasSubstr("created_at_us"));
}

class CaptureLogFileTest : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = fs::temp_directory_path() / testing::UniqueName("capture_log_test"); }
  void TearDown() override { fs::remove_all(dir_); }

  std::vector<LogRecord> ReplayAll(CaptureLogFile& file) {
    std::vector<LogRecord> records;
    file.Replay([&](const LogRecord& r) { records.push_back(r); });
    return records;
  }
  std::string FileText() const {
    std::ifstream in(dir_ / "captures.jsonl");
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }

  fs::path dir_;
};

TEST_F(CaptureLogFileTest, AppendedRecordsAreReplayedInOrderAfterReopening) {
  {
    CaptureLogFile file(dir_.string());
    EXPECT_TRUE(ReplayAll(file).empty());
    ASSERT_TRUE(file.Append(Encode(SampleCapture())));
    auto second = SampleCapture();
    second.id = "cap_def";
    ASSERT_TRUE(file.Append(Encode(second)));
  }
  CaptureLogFile reopened(dir_.string());
  const auto records = ReplayAll(reopened);
  ASSERT_EQ(records.size(), 2u);
  EXPECT_EQ(records[0], SampleCapture());
  EXPECT_EQ(records[1].id, "cap_def");
}

TEST_F(CaptureLogFileTest, ATornLastLineIsCutOffAndLaterAppendsStayReadable) {
  {
    CaptureLogFile file(dir_.string());
    ASSERT_TRUE(file.Append(Encode(SampleCapture())));
    const auto torn = Encode(SampleCapture());
    ASSERT_TRUE(file.Append(std::string_view(torn).substr(0, 40)));
  }
  {
    CaptureLogFile file(dir_.string());
    EXPECT_EQ(ReplayAll(file).size(), 1u);
    EXPECT_EQ(FileText(), Encode(SampleCapture()));
    auto next = SampleCapture();
    next.id = "cap_next";
    ASSERT_TRUE(file.Append(Encode(next)));
  }
  CaptureLogFile file(dir_.string());
  const auto records = ReplayAll(file);
  ASSERT_EQ(records.size(), 2u);
  EXPECT_EQ(records[1].id, "cap_next");
}

TEST_F(CaptureLogFileTest, ADamagedMiddleLineStopsTheReplayNamingTheLine) {
  {
    CaptureLogFile file(dir_.string());
    ASSERT_TRUE(file.Append(Encode(SampleCapture()) + "garbage\n" + Encode(SampleCapture())));
  }
  CaptureLogFile file(dir_.string());
  try {
    ReplayAll(file);
    FAIL() << "replayed a damaged log";
  } catch (const LogError& e) {
    EXPECT_THAT(e.what(), HasSubstr("captures.jsonl:2: not JSON"));
  }
}

TEST_F(CaptureLogFileTest, TruncateEmptiesTheFileAndAppendsStartAgain) {
  CaptureLogFile file(dir_.string());
  ASSERT_TRUE(file.Append(Encode(SampleCapture())));
  ASSERT_TRUE(file.Truncate());
  EXPECT_EQ(FileText(), "");
  ASSERT_TRUE(file.Append(Encode(SampleCapture())));
  EXPECT_EQ(FileText(), Encode(SampleCapture()));
}

TEST_F(CaptureLogFileTest, ASecondOpenOfTheSameDirectoryIsRefused) {
  CaptureLogFile first(dir_.string());
  try {
    CaptureLogFile second(dir_.string());
    FAIL() << "two logs open on one directory";
  } catch (const LogError& e) {
    EXPECT_THAT(e.what(), HasSubstr("in use by another acquirer-sim"));
  }
}

}  // namespace
}  // namespace charge_outbox::acquirer_sim
