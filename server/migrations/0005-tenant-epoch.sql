-- A counter that every change to the tenant tables moves on, whichever process makes it (the
-- CLI writes while the server runs). The server's tenant cache reads it when PRAGMA data_version
-- says another connection committed, and reloads only when it moved: a CLI change (a removed
-- tenant, a new origin) is seen by the very next request, and writes to other tables cost one
-- small read instead of a reload.
CREATE TABLE tenant_epoch (
  id INTEGER PRIMARY KEY CHECK (id = 1),
  v  INTEGER NOT NULL
);
INSERT INTO tenant_epoch (id, v) VALUES (1, 0);
CREATE TRIGGER tenants_epoch_insert AFTER INSERT ON tenants BEGIN UPDATE tenant_epoch SET v = v + 1; END;
CREATE TRIGGER tenants_epoch_update AFTER UPDATE ON tenants BEGIN UPDATE tenant_epoch SET v = v + 1; END;
CREATE TRIGGER tenants_epoch_delete AFTER DELETE ON tenants BEGIN UPDATE tenant_epoch SET v = v + 1; END;
CREATE TRIGGER tenant_hosts_epoch_insert AFTER INSERT ON tenant_hosts BEGIN UPDATE tenant_epoch SET v = v + 1; END;
CREATE TRIGGER tenant_hosts_epoch_update AFTER UPDATE ON tenant_hosts BEGIN UPDATE tenant_epoch SET v = v + 1; END;
CREATE TRIGGER tenant_hosts_epoch_delete AFTER DELETE ON tenant_hosts BEGIN UPDATE tenant_epoch SET v = v + 1; END;
