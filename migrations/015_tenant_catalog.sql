-- +goose Up
-- The event-type catalog is per app. The operator's types (POST or PATCH
-- /v1/event-types, and the operational types) are everyone's; a type first
-- seen in an app's events is that app's alone and no other app's catalog
-- shows it.
ALTER TABLE event_types ADD COLUMN operator boolean NOT NULL DEFAULT false;
-- Before this migration ingest added every new type to one shared catalog,
-- and which rows the operator made is not recorded. A row the operator
-- described stays shared, as does one no event uses (most likely declared
-- by the operator ahead of use; it may also be an app's whose events were
-- all pruned); a bare row that events use becomes the type of each app
-- whose events use it.
UPDATE event_types t SET operator = true
 WHERE t.description <> '' OR t.schema IS NOT NULL OR t.deprecated
    OR NOT EXISTS (SELECT 1 FROM events e WHERE e.type = t.name);
-- An app's catalog reads the operator's types by name; ingest still adds
-- every app's new names to event_types, so they are indexed apart.
CREATE INDEX event_types_operator ON event_types (name) WHERE operator;

CREATE TABLE app_event_types (
    app_id     text NOT NULL REFERENCES apps (id) ON DELETE CASCADE,
    name       text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (app_id, name)
);
INSERT INTO app_event_types (app_id, name, created_at)
SELECT e.app_id, e.type, min(e.received_at) FROM events e
 WHERE NOT EXISTS (SELECT 1 FROM event_types t WHERE t.name = e.type AND t.operator)
 GROUP BY e.app_id, e.type;

-- +goose StatementBegin
-- Every publisher (the API, a producer's own transaction, operational
-- events) records a type new to the app here, so the app's catalog never
-- depends on which path wrote the event. The API registers a type before
-- publishing (bounded per app); then this finds it and inserts nothing.
CREATE FUNCTION hookrelay_note_app_event_type() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  IF NOT EXISTS (SELECT 1 FROM app_event_types WHERE app_id = NEW.app_id AND name = NEW.type)
     AND NOT EXISTS (SELECT 1 FROM event_types WHERE name = NEW.type AND operator) THEN
    INSERT INTO app_event_types (app_id, name) VALUES (NEW.app_id, NEW.type) ON CONFLICT DO NOTHING;
  END IF;
  RETURN NULL;
END
$$;
-- +goose StatementEnd
CREATE TRIGGER events_note_app_event_type AFTER INSERT ON events
    FOR EACH ROW EXECUTE FUNCTION hookrelay_note_app_event_type();

-- +goose Down
DROP TRIGGER events_note_app_event_type ON events;
DROP FUNCTION hookrelay_note_app_event_type();
DROP TABLE app_event_types;
DROP INDEX event_types_operator;
ALTER TABLE event_types DROP COLUMN operator;
