-- settlement_charges keeps only the charges that count in the totals (captured_day set): a charge that
-- does not count contributes nothing, and a missing row says exactly that. Most charges never count
-- (every `initiated` event, every failure), so they now cost no write. Rows of such charges written
-- before this change go.
DELETE FROM settlement_charges WHERE captured_day IS NULL;
