-- The application's own table (examples/outbox-postgres). The outbox table
-- comes from `kstreams outbox-schema`.
CREATE TABLE IF NOT EXISTS orders (
    id bigserial PRIMARY KEY,
    customer text NOT NULL,
    amount integer NOT NULL CHECK (amount > 0)
);
