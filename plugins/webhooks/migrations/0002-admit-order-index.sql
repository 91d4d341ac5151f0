-- Admission reads "the oldest queued deliveries of a subscription" (ORDER BY created_at, rowid)
-- after every finished delivery. The first index ended in `id` (a random UUID), so rows of the
-- same millisecond (one event batch) were sorted in a temporary B-tree on every admission: a
-- cost that grew with the backlog. An index entry ends in the rowid (SQLite "CREATE INDEX"), so
-- without the `id` column the index is already in the wanted order and the LIMIT stops early.
DROP INDEX webhook_deliveries_sub;
CREATE INDEX webhook_deliveries_sub ON webhook_deliveries(subscription_id, state, created_at);
