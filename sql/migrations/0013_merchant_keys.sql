-- Merchants and their API keys made by a person with charge-admin (issue 43), audited like every other
-- action of a person.

-- A key's revoked_at may now lie ahead: a rotated key keeps working until then, beside its successor, so
-- that a merchant can roll its clients over. Authentication accepts a key while revoked_at is unset or in
-- the future.
COMMENT ON COLUMN api_keys.revoked_at IS 'from when the key is refused; in the future while a rotation''s overlap runs';

-- charge-admin names a key by its prefix (the first 16 characters of the keys it issues: sk_ and 13 random
-- ones, 78 bits): unique within a merchant for keys issued here, enforced where the prefix is chosen.
CREATE INDEX api_keys_prefix ON api_keys (merchant_id, key_prefix);

ALTER TABLE operator_actions DROP CONSTRAINT operator_actions_action_check;
ALTER TABLE operator_actions ADD CONSTRAINT operator_actions_action_check CHECK (action IN (
  'review.resolve', 'parked.retry', 'parked.skip', 'merchant.add', 'key.issue', 'key.rotate', 'key.revoke'));
