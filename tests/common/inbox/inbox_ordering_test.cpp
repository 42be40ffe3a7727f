// PlanCharge, the inbox's per-charge ordering (docs/events.md "How to consume"): the next event applies,
// re-deliveries are duplicates, a batch's events apply in sequence order, a gap holds the event past it
// and everything after, a held event applies once its predecessor arrives, and past a gap only under
// the `apply` policy once the wait is over.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <deque>
#include <string>

#include "charge_outbox/inbox/ordering.hpp"

namespace charge_outbox::inbox {
namespace {

using namespace std::chrono_literals;
using ::testing::ElementsAre;
using ::testing::IsEmpty;
using Clock = std::chrono::system_clock;

class InboxOrderingTest : public ::testing::Test {
 protected:
  // An event of the one charge these tests plan; `id` defaults to one derived from the sequence.
  const ChargeEvent* Event(int sequence, std::string id = {}) {
    if (id.empty()) id = "e" + std::to_string(sequence);
    events_.push_back({.event_id = std::move(id),
                       .event_type = "payments.charge.captured.v1",
                       .event_time = now_,
                       .charge_id = "ch_1",
                       .sequence = sequence,
                       .payload = "{}"});
    return &events_.back();
  }
  Candidate Arrived(int sequence, std::string id = {}) { return {.event = Event(sequence, std::move(id)), .held_since = std::nullopt}; }
  Candidate Held(int sequence, std::chrono::milliseconds ago) { return {.event = Event(sequence), .held_since = now_ - ago}; }

  ChargePlan Plan(int last, const std::vector<Candidate>& candidates, GapOptions gaps = {}) {
    return PlanCharge(last, candidates, now_, gaps);
  }

  static std::vector<int> Sequences(const std::vector<const ChargeEvent*>& events) {
    std::vector<int> out;
    for (const auto* e : events) out.push_back(e->sequence);
    return out;
  }
  static std::vector<int> Sequences(const std::vector<Step>& steps) {
    std::vector<int> out;
    for (const auto& s : steps) out.push_back(s.event->sequence);
    return out;
  }
  static std::vector<std::string> Ids(const std::vector<const ChargeEvent*>& events) {
    std::vector<std::string> out;
    for (const auto* e : events) out.push_back(e->event_id);
    return out;
  }

  Clock::time_point now_ = Clock::now();
  std::deque<ChargeEvent> events_;  // stable addresses
};

TEST_F(InboxOrderingTest, TheNextInOrderApplies) {
  const auto plan = Plan(2, {Arrived(3)});
  ASSERT_THAT(Sequences(plan.apply), ElementsAre(3));
  EXPECT_EQ(plan.apply[0].gap_before, 0);
  EXPECT_FALSE(plan.apply[0].was_held);
  EXPECT_THAT(plan.hold, IsEmpty());
  EXPECT_THAT(plan.duplicates, IsEmpty());
  EXPECT_EQ(plan.last_sequence, 3);
}

TEST_F(InboxOrderingTest, TheFirstEventOfANewChargeApplies) {
  const auto plan = Plan(0, {Arrived(1)});
  EXPECT_THAT(Sequences(plan.apply), ElementsAre(1));
  EXPECT_EQ(plan.last_sequence, 1);
}

TEST_F(InboxOrderingTest, EventsAtOrBelowTheLastAppliedAreDuplicates) {
  const auto plan = Plan(3, {Arrived(2), Arrived(3), Arrived(1)});
  EXPECT_THAT(plan.apply, IsEmpty());
  EXPECT_THAT(Sequences(plan.duplicates), ElementsAre(2, 3, 1));
  EXPECT_THAT(plan.hold, IsEmpty());
  EXPECT_EQ(plan.last_sequence, 3);
}

TEST_F(InboxOrderingTest, TheSameIdTwiceInABatchAppliesOnce) {
  const auto plan = Plan(0, {Arrived(1, "a"), Arrived(1, "a")});
  ASSERT_THAT(Sequences(plan.apply), ElementsAre(1));
  EXPECT_THAT(Ids(plan.duplicates), ElementsAre("a"));
  EXPECT_EQ(plan.last_sequence, 1);
}

TEST_F(InboxOrderingTest, TheSameSequenceTwiceUnderTwoIdsAppliesTheFirstOnly) {
  const auto plan = Plan(0, {Arrived(1, "first"), Arrived(1, "second")});
  ASSERT_EQ(plan.apply.size(), 1u);
  EXPECT_EQ(plan.apply[0].event->event_id, "first");
  EXPECT_THAT(Ids(plan.duplicates), ElementsAre("second"));
}

TEST_F(InboxOrderingTest, TwoBeforeOneInABatchAppliesBothInOrder) {
  const auto plan = Plan(0, {Arrived(2), Arrived(1)});
  ASSERT_THAT(Sequences(plan.apply), ElementsAre(1, 2));
  EXPECT_EQ(plan.apply[0].gap_before, 0);
  EXPECT_EQ(plan.apply[1].gap_before, 0);
  EXPECT_THAT(plan.hold, IsEmpty());
  EXPECT_EQ(plan.last_sequence, 2);
}

TEST_F(InboxOrderingTest, AGapHoldsTheEventAndEverythingAfterIt) {
  const auto plan = Plan(0, {Arrived(4), Arrived(1), Arrived(3), Arrived(6)});
  EXPECT_THAT(Sequences(plan.apply), ElementsAre(1));
  EXPECT_THAT(Sequences(plan.hold), ElementsAre(3, 4, 6));
  EXPECT_THAT(plan.duplicates, IsEmpty());
  EXPECT_EQ(plan.last_sequence, 1);
}

TEST_F(InboxOrderingTest, AHeldEventAppliesOnceItsPredecessorArrives) {
  const auto plan = Plan(1, {Held(3, 1s), Held(4, 1s), Arrived(2)});
  ASSERT_THAT(Sequences(plan.apply), ElementsAre(2, 3, 4));
  EXPECT_FALSE(plan.apply[0].was_held);
  EXPECT_TRUE(plan.apply[1].was_held);
  EXPECT_TRUE(plan.apply[2].was_held);
  for (const auto& step : plan.apply) EXPECT_EQ(step.gap_before, 0) << step.event->sequence;
  EXPECT_THAT(plan.hold, IsEmpty());
  EXPECT_THAT(plan.drop_held, IsEmpty());
  EXPECT_EQ(plan.last_sequence, 4);
}

TEST_F(InboxOrderingTest, AHeldEventStaysHeldWithoutBeingHeldAgain) {
  const auto plan = Plan(1, {Held(3, 1s), Arrived(4)}, {.policy = GapPolicy::kApply, .wait = 30s});
  EXPECT_THAT(plan.apply, IsEmpty());
  // 3 is already in the held set; only 4 is new to it.
  EXPECT_THAT(Sequences(plan.hold), ElementsAre(4));
  EXPECT_EQ(plan.last_sequence, 1);
}

TEST_F(InboxOrderingTest, TheSameEventArrivingWhileHeldIsADuplicate) {
  const auto held = Held(3, 1s);
  const auto plan = Plan(1, {held, {.event = Event(3, held.event->event_id), .held_since = std::nullopt}});
  EXPECT_THAT(plan.apply, IsEmpty());
  EXPECT_THAT(plan.hold, IsEmpty());
  EXPECT_THAT(Sequences(plan.duplicates), ElementsAre(3));
}

TEST_F(InboxOrderingTest, ApplyPolicyAppliesPastTheGapOnceTheWaitIsOverAndContinues) {
  const GapOptions gaps{.policy = GapPolicy::kApply, .wait = 30s};
  const auto plan = Plan(1, {Held(4, 31s), Held(5, 31s), Arrived(6), Arrived(8)}, gaps);
  ASSERT_THAT(Sequences(plan.apply), ElementsAre(4, 5, 6));
  EXPECT_EQ(plan.apply[0].gap_before, 2);  // 2 and 3 never came
  EXPECT_TRUE(plan.apply[0].was_held);
  EXPECT_EQ(plan.apply[1].gap_before, 0);
  EXPECT_TRUE(plan.apply[1].was_held);
  EXPECT_EQ(plan.apply[2].gap_before, 0);
  EXPECT_FALSE(plan.apply[2].was_held);
  // 8 is past a new gap (7) that has not waited at all.
  EXPECT_THAT(Sequences(plan.hold), ElementsAre(8));
  EXPECT_EQ(plan.last_sequence, 6);
}

TEST_F(InboxOrderingTest, ApplyPolicyWaitsWhileTheWaitIsNotOver) {
  const GapOptions gaps{.policy = GapPolicy::kApply, .wait = 30s};
  const auto plan = Plan(1, {Held(4, 29s), Arrived(5)}, gaps);
  EXPECT_THAT(plan.apply, IsEmpty());
  EXPECT_THAT(Sequences(plan.hold), ElementsAre(5));
  EXPECT_EQ(plan.last_sequence, 1);
}

TEST_F(InboxOrderingTest, ApplyPolicyWithNoWaitAppliesAFreshEventPastTheGap) {
  const auto plan = Plan(0, {Arrived(3)}, {.policy = GapPolicy::kApply, .wait = 0ms});
  ASSERT_THAT(Sequences(plan.apply), ElementsAre(3));
  EXPECT_EQ(plan.apply[0].gap_before, 2);
  EXPECT_FALSE(plan.apply[0].was_held);
  EXPECT_EQ(plan.last_sequence, 3);
}

TEST_F(InboxOrderingTest, HoldPolicyNeverAppliesPastAGap) {
  const GapOptions gaps{.policy = GapPolicy::kHold, .wait = 0ms};
  const auto plan = Plan(1, {Held(3, 24h * 365), Arrived(4)}, gaps);
  EXPECT_THAT(plan.apply, IsEmpty());
  EXPECT_THAT(Sequences(plan.hold), ElementsAre(4));
  EXPECT_EQ(plan.last_sequence, 1);

  // The missing one still releases them.
  const auto filled = Plan(1, {Held(3, 24h * 365), Held(4, 1s), Arrived(2)}, gaps);
  EXPECT_THAT(Sequences(filled.apply), ElementsAre(2, 3, 4));
}

TEST_F(InboxOrderingTest, HeldEventsAtOrBelowTheLastAppliedAreDropped) {
  const auto plan = Plan(3, {Held(2, 1s), Held(3, 1s), Held(5, 1s), Arrived(4)});
  EXPECT_THAT(Sequences(plan.drop_held), ElementsAre(2, 3));
  EXPECT_THAT(plan.duplicates, IsEmpty());
  ASSERT_THAT(Sequences(plan.apply), ElementsAre(4, 5));
  EXPECT_FALSE(plan.apply[0].was_held);
  EXPECT_TRUE(plan.apply[1].was_held);
  EXPECT_EQ(plan.last_sequence, 5);
}

}  // namespace
}  // namespace charge_outbox::inbox
