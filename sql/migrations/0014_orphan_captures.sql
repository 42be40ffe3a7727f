-- Captures the acquirer holds that no charge of ours names: the window report's
-- `capture_without_local_record` (issue 43), money taken that our books do not show. Until now the report
-- printed them and forgot them; this table keeps each one until a person has settled it with charge-admin
-- (`orphan void`: the acquirer gives the money back; `orphan adopt`: the charge whose record was lost is
-- written back, captured, with its events). docs/reconciler.md, "Captures without a charge of ours".
--
-- Written by the window report (one row per capture, on a settled window) and by charge-admin; the
-- orphan capture store (common/src/charges/pg/pg_orphan_capture_store.cpp) holds every statement.
CREATE TABLE orphan_captures (
  -- The capture as the acquirer listed it. Its id is the acquirer's, so a report run twice over the same
  -- window finds the same row.
  capture_id            text        PRIMARY KEY CHECK (length(capture_id) BETWEEN 1 AND 100),
  idempotency_key       text,       -- the acquirer's key of the capture, when the listing shows it
  reference             text        NOT NULL,
  amount                bigint      NOT NULL,
  currency              text        NOT NULL,
  captured_at           timestamptz NOT NULL,  -- the acquirer's created_at
  listed_status         text        NOT NULL CHECK (listed_status IN ('captured', 'voided')),  -- as last listed
  -- The window of the report that first found it, and when reports found it.
  window_from           timestamptz NOT NULL,
  window_to             timestamptz NOT NULL,
  first_seen_at         timestamptz NOT NULL DEFAULT now(),
  last_seen_at          timestamptz NOT NULL DEFAULT now(),
  -- open: for a person. voided: a person's void was confirmed. adopted: written back as adopted_charge_id.
  status                text        NOT NULL DEFAULT 'open' CHECK (status IN ('open', 'voided', 'adopted')),
  -- Voids a person asked for, counted before each is sent (as charges.voids_recorded), and the latest
  -- one's answer (an outcome kind; NULL while it is unanswered or its answer was lost): an adoption lands
  -- only if no void was recorded since the person read the count and none may have voided.
  voids_recorded        integer     NOT NULL DEFAULT 0,
  last_void_outcome     text,
  last_void_http_status smallint,
  adopted_charge_id     uuid        REFERENCES charges (id),
  resolved_by           text,
  resolved_at           timestamptz
);
-- `orphan list` reads the open ones, few among the settled.
CREATE INDEX orphan_captures_open ON orphan_captures (captured_at) WHERE status = 'open';

ALTER TABLE operator_actions DROP CONSTRAINT operator_actions_action_check;
ALTER TABLE operator_actions ADD CONSTRAINT operator_actions_action_check CHECK (action IN (
  'review.resolve', 'parked.retry', 'parked.skip', 'merchant.add', 'key.issue', 'key.rotate', 'key.revoke',
  'orphan.void', 'orphan.adopt'));
