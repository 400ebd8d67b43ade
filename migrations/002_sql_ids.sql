-- +goose Up
-- +goose StatementBegin
-- hookrelay_id makes a sortable ID in SQL with the same layout as the Go
-- ids package: prefix, 10 Crockford base32 characters of millisecond time,
-- 16 of randomness. Ingest uses it to write an event, its deliveries and
-- their outbox rows in one statement.
CREATE FUNCTION hookrelay_id(prefix text) RETURNS text
LANGUAGE plpgsql VOLATILE PARALLEL SAFE AS $$
DECLARE
  alphabet constant text := '0123456789ABCDEFGHJKMNPQRSTVWXYZ';
  ms bigint := floor(extract(epoch FROM clock_timestamp()) * 1000);
  out text := prefix;
BEGIN
  FOR i IN REVERSE 9..0 LOOP
    out := out || substr(alphabet, ((ms >> (i * 5)) & 31)::int + 1, 1);
  END LOOP;
  FOR i IN 1..16 LOOP
    out := out || substr(alphabet, floor(random() * 32)::int + 1, 1);
  END LOOP;
  RETURN out;
END
$$;
-- +goose StatementEnd

-- +goose Down
DROP FUNCTION hookrelay_id(text);
