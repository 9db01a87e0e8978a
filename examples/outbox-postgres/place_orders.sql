-- What the application does (examples/outbox-postgres): each order and its
-- event in ONE transaction of its own database. The second transaction
-- fails (an amount of 0 breaks the orders table's CHECK) and rolls back:
-- neither its order nor its event exists, so nothing is published for it.
\set ON_ERROR_STOP 0
BEGIN;
INSERT INTO orders (customer, amount) VALUES ('customer-7', 40);
INSERT INTO ks_outbox (aggregate, payload, headers)
VALUES ('customer-7', convert_to('{"type":"OrderPlaced","customer":"customer-7","amount":40}', 'UTF8'),
        '{"type": "OrderPlaced"}');
COMMIT;

BEGIN;
INSERT INTO ks_outbox (aggregate, payload, headers)
VALUES ('customer-8', convert_to('{"type":"OrderPlaced","customer":"customer-8","amount":0}', 'UTF8'),
        '{"type": "OrderPlaced"}');
INSERT INTO orders (customer, amount) VALUES ('customer-8', 0);
COMMIT;

BEGIN;
INSERT INTO orders (customer, amount) VALUES ('customer-9', 15);
INSERT INTO ks_outbox (aggregate, payload, headers)
VALUES ('customer-9', convert_to('{"type":"OrderPlaced","customer":"customer-9","amount":15}', 'UTF8'),
        '{"type": "OrderPlaced"}');
COMMIT;

BEGIN;
INSERT INTO orders (customer, amount) VALUES ('customer-7', 25);
INSERT INTO ks_outbox (aggregate, payload, headers)
VALUES ('customer-7', convert_to('{"type":"OrderPlaced","customer":"customer-7","amount":25}', 'UTF8'),
        '{"type": "OrderPlaced"}');
COMMIT;
