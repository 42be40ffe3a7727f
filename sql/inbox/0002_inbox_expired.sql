-- Events the inbox did not apply because they were too old (docs/inbox.md, "Retention"): their Kafka record
-- is older than inbox.retention_days (ce_time for a record without a timestamp), or their own time is
-- older than inbox.progress_retention_days. Their offsets are committed like any other's, so this table
-- is the only trace of them: normally empty. Written in the batch's transaction, never blocking the
-- partition; a record read again is kept once. Rows stay until a person has decided whether their effects
-- are owed and deletes them.
CREATE TABLE inbox_expired (
  topic           text        NOT NULL,
  kafka_partition integer     NOT NULL,
  kafka_offset    bigint      NOT NULL,
  event_id        uuid        NOT NULL,  -- ce_id
  event_type      text        NOT NULL,  -- ce_type
  charge_id       text COLLATE "C" NOT NULL,  -- the Kafka key, ce_subject
  sequence        integer     NOT NULL,
  event_time      timestamptz NOT NULL,  -- ce_time
  record_time     timestamptz,           -- the record's timestamp; NULL when it had none
  seen_at         timestamptz NOT NULL DEFAULT now(),  -- when the inbox read it and did not apply it
  payload         text        NOT NULL,  -- the charge as JSON, as published, cut at 64 KiB
  PRIMARY KEY (topic, kafka_partition, kafka_offset)
);
