-- Domain events (issue #27): the outbox a change writes its event to in its
-- own transaction, and what each subscriber has still to receive. A trigger
-- gives every new event one delivery per subscriber of `event_subscribers`;
-- a subscriber's dispatcher takes its deliveries in event order and removes
-- each once handled, and an event goes once no delivery of it is left.
-- Keep in step with the other backend's file of the same name.
CREATE TABLE events (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    -- `artifact.pushed`, ...
    kind TEXT NOT NULL,
    -- No foreign key: an event outlives what it tells of.
    project_id BIGINT,
    -- What changed, by name (`library/app:v1`).
    resource TEXT NOT NULL,
    -- Who changed it (a username, a robot's name, `anonymous`).
    actor TEXT NOT NULL,
    occurred_at TEXT NOT NULL
);

CREATE TABLE event_subscribers (
    name TEXT PRIMARY KEY
);
-- The audit log is the first subscriber: an acknowledged change always gets
-- its audit entry, a crash right after it included.
INSERT INTO event_subscribers (name) VALUES ('audit');

CREATE TABLE event_deliveries (
    subscriber TEXT NOT NULL,
    event_id BIGINT NOT NULL REFERENCES events (id) ON DELETE CASCADE,
    PRIMARY KEY (subscriber, event_id)
);
CREATE INDEX event_deliveries_event_idx ON event_deliveries (event_id);

CREATE TRIGGER events_delivered_to_subscribers AFTER INSERT ON events
BEGIN
    INSERT INTO event_deliveries (subscriber, event_id) SELECT name, NEW.id FROM event_subscribers;
END;
