-- A person's decision on a charge in needs_review (issue 42; docs/charge-states.md, "Leaving
-- needs_review"; docs/operations.md, "Charges that need a person"), and the audit trail of every action a
-- person takes through charge-admin.

-- PostgreSQL 15.20 refuses to alter a table while a function with a SQL-standard body (0007's
-- charge_event_payload) uses its row type; the function is made again below, with the new columns. This
-- file was edited for that (5 December 2026): databases that applied the earlier text, which had the same
-- effect, are accepted (common/src/db/migrations.cpp, kEquivalentChecksums).
DROP FUNCTION charge_event_payload(charges);

-- Who decided the charge's state by hand, NULL while no person did. The charge's events say so
-- (charge_event_payload's `resolution`), so consumers tell a person's decision from the acquirer's.
ALTER TABLE charges ADD COLUMN resolved_by text;

-- Voids of the charge recorded so far (every actor's, counted as each attempt is recorded). A person's
-- decision lands only if no void was recorded since the person read the count: being a column of the row,
-- it is seen by a decision's statement that waited on the void's row lock, where a NOT EXISTS over the
-- attempts would be read from that statement's older snapshot. A constant default: no table rewrite.
ALTER TABLE charges ADD COLUMN voids_recorded integer NOT NULL DEFAULT 0;

-- Every action of a person, kept apart from the charges so that a charge's row stays the state and this
-- table the story: who, when, why, the state before and after, and what the acquirer said at that moment.
-- Written in the same statement as the change it records. Kept far longer than the outbox: seven years,
-- pruned by age only (charge-admin audit prune; docs/operations.md, "The audit trail").
CREATE TABLE operator_actions (
  id               bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  at               timestamptz NOT NULL DEFAULT clock_timestamp(),
  operator         text        NOT NULL CHECK (length(operator) BETWEEN 1 AND 200),
  action           text        NOT NULL CHECK (action IN ('review.resolve', 'parked.retry', 'parked.skip')),
  -- The charge (its public id) or the outbox event (its id) acted on.
  subject          text        NOT NULL CHECK (length(subject) BETWEEN 1 AND 100),
  reason           text        NOT NULL CHECK (length(reason) BETWEEN 1 AND 2000),
  before           text,
  after            text,
  -- The acquirer's answer the decision was taken on, in words ("a live capture cap_... of 1000 BRL").
  acquirer_said    text        CHECK (length(acquirer_said) <= 1000),
  -- The person overrode what the acquirer said (charge-admin --against-acquirer).
  against_acquirer boolean     NOT NULL DEFAULT false
);
CREATE INDEX operator_actions_subject ON operator_actions (subject, at);
CREATE INDEX operator_actions_at ON operator_actions (at);

-- `review list` and the charges_needs_review gauge read only these rows, few among many. Built in the
-- migration's transaction, which holds writes to `charges` back while it scans the table once: 130 ms per
-- million charges with the table in memory (measured 5 December, 1,000,000 rows, 387 MB), at the disk's
-- read speed when it is not.
CREATE INDEX charges_needs_review ON charges (failure_reason, updated_at) WHERE status = 'needs_review';

-- The Kafka value of an event, as in 0007, with the person's decision when one set the state the event
-- announces. A later needs_review (the acquirer contradicting that decision) does not repeat it.
CREATE FUNCTION charge_event_payload(c charges) RETURNS json
LANGUAGE sql STABLE PARALLEL SAFE
RETURN json_strip_nulls(json_build_object(
  'id', charge_public_id(c.id),
  'merchant_id', c.merchant_id,
  'order_id', c.order_id,
  'amount', c.amount,
  'currency', c.currency,
  'description', c.description,
  'status', c.status,
  'acquirer_capture_id', c.acquirer_capture_id,
  'decline_code', c.decline_code,
  'failure_reason', c.failure_reason,
  'resolution', CASE WHEN c.resolved_by IS NOT NULL AND c.status <> 'needs_review'
                     THEN json_build_object('decided_by', 'operator', 'operator', c.resolved_by) END,
  'sequence', c.last_sequence,
  'created_at', rfc3339(c.created_at),
  'updated_at', rfc3339(c.updated_at)));
