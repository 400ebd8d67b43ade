-- +goose Up
-- An endpoint's payload filter: a CEL expression, '' for every event
-- (package filter). An event keeps the endpoints whose filter skipped it,
-- with the evaluation error when there was one (NULL: none skipped it).
ALTER TABLE endpoints ADD COLUMN filter text NOT NULL DEFAULT '';
ALTER TABLE events ADD COLUMN filtered_out jsonb;

-- +goose Down
ALTER TABLE events DROP COLUMN filtered_out;
ALTER TABLE endpoints DROP COLUMN filter;
