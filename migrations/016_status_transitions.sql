-- +goose Up
-- A delivery's status changes only as the transition table in package
-- delivery allows (delivery.Allowed): pending -> delivering, succeeded,
-- dead_lettered or canceled; delivering -> succeeded, dead_lettered or
-- canceled; a finished status -> pending (a replay). Every statement that
-- changes a status is held to it here, so a final status never changes but
-- by a replay. A refusal is SQLSTATE HR001 with DETAIL "<id> <from> <to>",
-- which the store turns into *delivery.TransitionError.
-- +goose StatementBegin
CREATE FUNCTION deliveries_status_transition() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF (OLD.status, NEW.status) IN (
       ('pending', 'delivering'), ('pending', 'succeeded'), ('pending', 'dead_lettered'), ('pending', 'canceled'),
       ('delivering', 'succeeded'), ('delivering', 'dead_lettered'), ('delivering', 'canceled'),
       ('succeeded', 'pending'), ('dead_lettered', 'pending'), ('canceled', 'pending')) THEN
    RETURN NEW;
  END IF;
  RAISE EXCEPTION 'delivery %: no transition from % to %', OLD.id, OLD.status, NEW.status
    USING ERRCODE = 'HR001', DETAIL = OLD.id || ' ' || OLD.status || ' ' || NEW.status;
END
$$;
-- +goose StatementEnd
CREATE TRIGGER deliveries_status_transition BEFORE UPDATE OF status ON deliveries
  FOR EACH ROW WHEN (OLD.status IS DISTINCT FROM NEW.status) EXECUTE FUNCTION deliveries_status_transition();

-- +goose Down
DROP TRIGGER deliveries_status_transition ON deliveries;
DROP FUNCTION deliveries_status_transition();
