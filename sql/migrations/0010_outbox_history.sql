-- Published history leaves the table the relay claims from (docs/outbox-relay.md, "Retention").
--
-- The relay's claim and mark are generic plans over the partitioned outbox, and PostgreSQL 15 locks every
-- partition of such a plan at each execution, opens the ones that survive pruning, and releases the
-- locks at commit: measured, about 40% of the relay's backend CPU at a steady 1,000 events/s with
-- production's sixteen partitions. Most of them hold only published rows (retention.days of history)
-- or nothing yet (the days made ahead). Retention now moves a fully published day older than yesterday
-- out of `outbox` and under `outbox_history`, and drops it there at retention age; `outbox` keeps only
-- the days that can still receive or hold unpublished rows.
--
-- outbox_history is a plain inheritance parent, not a partitioned table: attaching a day as a partition
-- would scan the whole day to validate its bounds (tens of gigabytes at production's rate), while
-- INHERIT changes the catalog only. It holds no rows of its own; nothing inserts into it. Read it for
-- published events older than yesterday: SELECT … FROM outbox_history WHERE …
--
-- A migration that changes outbox's columns must change outbox_history's the same way: a day whose
-- columns differ from its parent's cannot join it (retention would then keep the day where it is and log
-- why).
CREATE TABLE outbox_history (LIKE outbox);

