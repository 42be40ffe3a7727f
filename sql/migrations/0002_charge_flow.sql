-- What the charge flow needs beyond the core tables: an attempt counter per charge, and the SQL
-- functions that keep one definition of a charge's public id, an event's shard and an event's payload.

-- Attempt numbers come from the charge row itself: the UPDATE that takes the next number locks the row,
-- so charge-api and the reconciler can record attempts for one charge at once without colliding.
ALTER TABLE charges ADD COLUMN attempt_count integer NOT NULL DEFAULT 0;

-- The id the API returns and the acquirer receives as `reference`: "ch_" and 32 hex digits.
CREATE FUNCTION charge_public_id(id uuid) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN 'ch_' || replace(id::text, '-', '');

-- RFC 3339 in UTC with milliseconds, as every API body and event carries times.
CREATE FUNCTION rfc3339(t timestamptz) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN to_char(t AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"');

-- 256 shards from the last byte of the (random, version 4) charge id: every event of one charge has
-- the same shard, and the relay keeps per-charge order by owning shards.
CREATE FUNCTION outbox_shard(charge_id uuid) RETURNS smallint
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN get_byte(uuid_send(charge_id), 15)::smallint;

-- The Kafka value of an event: the charge as of the event, with its per-charge sequence. The payment
-- method token stays out: consumers do not need it.
CREATE FUNCTION charge_event_payload(c charges) RETURNS jsonb
LANGUAGE sql STABLE PARALLEL SAFE
RETURN jsonb_strip_nulls(jsonb_build_object(
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
  'sequence', c.last_sequence,
  'created_at', rfc3339(c.created_at),
  'updated_at', rfc3339(c.updated_at)));
