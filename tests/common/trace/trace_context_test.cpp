#include "charge_outbox/trace/trace_context.hpp"

#include <gtest/gtest.h>

namespace charge_outbox::trace {
namespace {

TEST(ParseTraceparent, AcceptsTheSpecExample) {
  const auto ctx = ParseTraceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01");
  ASSERT_TRUE(ctx.has_value());
  EXPECT_EQ(ctx->trace_id, "4bf92f3577b34da6a3ce929d0e0e4736");
  EXPECT_EQ(ctx->span_id, "00f067aa0ba902b7");
  EXPECT_TRUE(ctx->sampled);
  EXPECT_EQ(ctx->ToTraceparent(), "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01");
}

TEST(ParseTraceparent, ReadsAFutureVersionAsVersionZero) {
  EXPECT_TRUE(ParseTraceparent("01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00-extra").has_value());
}

TEST(ParseTraceparent, RejectsMalformedHeaders) {
  for (const char* bad : {"", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
                          "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
                          "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
                          "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
                          "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
                          "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
                          "00_4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}) {
    EXPECT_FALSE(ParseTraceparent(bad).has_value()) << bad;
  }
}

TEST(NewTrace, IsValidAndChildKeepsTheTrace) {
  const auto root = NewTrace();
  const auto parsed = ParseTraceparent(root.ToTraceparent());
  ASSERT_TRUE(parsed.has_value());
  EXPECT_EQ(parsed->trace_id, root.trace_id);
  const auto child = ChildOf(root);
  EXPECT_EQ(child.trace_id, root.trace_id);
  EXPECT_NE(child.span_id, root.span_id);
  EXPECT_NE(NewTrace().trace_id, root.trace_id);
}

}  // namespace
}  // namespace charge_outbox::trace
