-- Rows per tenant, kept by triggers in the same transaction as every insert and delete, so the
-- unfiltered listing's `total` is one primary-key lookup instead of a COUNT(*) over the tenant's
-- whole index range (about 5 ms at 100,000 rows on the benchmark machine, and linear in the rows;
-- bench/core.bench.ts). Filtered listings still count with COUNT(*).
CREATE TABLE audit_counts (
  tenant_id  TEXT PRIMARY KEY,
  n          INTEGER NOT NULL
) STRICT, WITHOUT ROWID;

INSERT INTO audit_counts (tenant_id, n) SELECT tenant_id, COUNT(*) FROM audit_log GROUP BY tenant_id;

CREATE TRIGGER audit_log_count_insert AFTER INSERT ON audit_log BEGIN
  INSERT INTO audit_counts (tenant_id, n) VALUES (NEW.tenant_id, 1)
    ON CONFLICT (tenant_id) DO UPDATE SET n = n + 1;
END;

CREATE TRIGGER audit_log_count_delete AFTER DELETE ON audit_log BEGIN
  UPDATE audit_counts SET n = n - 1 WHERE tenant_id = OLD.tenant_id;
END;

CREATE TRIGGER audit_log_count_move AFTER UPDATE OF tenant_id ON audit_log WHEN NEW.tenant_id IS NOT OLD.tenant_id BEGIN
  UPDATE audit_counts SET n = n - 1 WHERE tenant_id = OLD.tenant_id;
  INSERT INTO audit_counts (tenant_id, n) VALUES (NEW.tenant_id, 1)
    ON CONFLICT (tenant_id) DO UPDATE SET n = n + 1;
END;
