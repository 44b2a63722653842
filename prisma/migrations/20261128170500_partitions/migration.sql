-- Monthly partitions (CONTRACT §18): usage_records, events, webhook_deliveries, webhook_attempts and audit_events
-- become PARTITION BY RANGE on their time column, so that retention drops whole months (src/jobs/partition-upkeep).
-- Each table is renamed, recreated partitioned with the same columns, indexes and foreign keys to the tables that are
-- not partitioned, given a partition per month that holds rows plus the current month and the next two (UTC) and a
-- DEFAULT partition (a row of a month without its partition lands there instead of failing), filled with INSERT …
-- SELECT, and the old table dropped. The whole script is one transaction: it converts every row or nothing.
--
-- A partitioned table's primary key must contain the partition key: the keys become (id, created_at),
-- (request_id, created_at) and (id, attempted_at); Prisma still addresses rows by id (schema.prisma keeps @id).
-- usage_records dedups on request_id alone through usage_request_ids (one row per request id, kept as long as its
-- usage record's month) filled by a BEFORE INSERT trigger that skips a row whose request id is there already, in any
-- month: the exact "ON CONFLICT (request_id) DO NOTHING" the usage writer relied on.
-- The foreign keys between events, deliveries and attempts go (a key referencing a partitioned table would have to
-- include its partition key, and would stop a month from being dropped whole); the three are dropped month by month
-- under the same retention (SVC_EVENTS_RETENTION_DAYS), and Prisma keeps the relations for reads.

-- Set the old tables aside: names of constraints and indexes are freed for the new ones.
ALTER TABLE "webhook_attempts" DROP CONSTRAINT "webhook_attempts_delivery_id_fkey";
ALTER TABLE "webhook_deliveries" DROP CONSTRAINT "webhook_deliveries_event_id_fkey";
ALTER TABLE "webhook_deliveries" DROP CONSTRAINT "webhook_deliveries_webhook_id_fkey";
ALTER TABLE "events" DROP CONSTRAINT "events_project_id_fkey";
ALTER TABLE "audit_events" DROP CONSTRAINT "audit_events_project_id_fkey";
ALTER TABLE "usage_records" DROP CONSTRAINT "usage_records_project_id_fkey";

DROP INDEX "audit_events_project_id_id_idx";
DROP INDEX "audit_events_project_id_action_id_idx";
DROP INDEX "events_project_id_id_idx";
DROP INDEX "webhook_deliveries_webhook_id_id_idx";
DROP INDEX "webhook_deliveries_status_next_attempt_at_idx";
DROP INDEX "webhook_attempts_delivery_id_attempt_idx";
DROP INDEX "usage_records_project_id_request_id_idx";
DROP INDEX "usage_records_project_id_created_at_idx";

ALTER TABLE "usage_records" RENAME CONSTRAINT "usage_records_pkey" TO "usage_records_unpartitioned_pkey";
ALTER TABLE "usage_records" RENAME TO "usage_records_unpartitioned";
ALTER TABLE "events" RENAME CONSTRAINT "events_pkey" TO "events_unpartitioned_pkey";
ALTER TABLE "events" RENAME TO "events_unpartitioned";
ALTER TABLE "webhook_deliveries" RENAME CONSTRAINT "webhook_deliveries_pkey" TO "webhook_deliveries_unpartitioned_pkey";
ALTER TABLE "webhook_deliveries" RENAME TO "webhook_deliveries_unpartitioned";
ALTER TABLE "webhook_attempts" RENAME CONSTRAINT "webhook_attempts_pkey" TO "webhook_attempts_unpartitioned_pkey";
ALTER TABLE "webhook_attempts" RENAME TO "webhook_attempts_unpartitioned";
ALTER TABLE "audit_events" RENAME CONSTRAINT "audit_events_pkey" TO "audit_events_unpartitioned_pkey";
ALTER TABLE "audit_events" RENAME TO "audit_events_unpartitioned";

-- The partitioned tables: the same columns (order, types, defaults, NOT NULL) as the old ones.
CREATE TABLE "usage_records" (
    LIKE "usage_records_unpartitioned" INCLUDING DEFAULTS,
    CONSTRAINT "usage_records_pkey" PRIMARY KEY ("request_id", "created_at")
) PARTITION BY RANGE ("created_at");
CREATE TABLE "events" (
    LIKE "events_unpartitioned" INCLUDING DEFAULTS,
    CONSTRAINT "events_pkey" PRIMARY KEY ("id", "created_at")
) PARTITION BY RANGE ("created_at");
CREATE TABLE "webhook_deliveries" (
    LIKE "webhook_deliveries_unpartitioned" INCLUDING DEFAULTS,
    CONSTRAINT "webhook_deliveries_pkey" PRIMARY KEY ("id", "created_at")
) PARTITION BY RANGE ("created_at");
CREATE TABLE "webhook_attempts" (
    LIKE "webhook_attempts_unpartitioned" INCLUDING DEFAULTS,
    CONSTRAINT "webhook_attempts_pkey" PRIMARY KEY ("id", "attempted_at")
) PARTITION BY RANGE ("attempted_at");
CREATE TABLE "audit_events" (
    LIKE "audit_events_unpartitioned" INCLUDING DEFAULTS,
    CONSTRAINT "audit_events_pkey" PRIMARY KEY ("id", "created_at")
) PARTITION BY RANGE ("created_at");

CREATE INDEX "audit_events_project_id_id_idx" ON "audit_events"("project_id", "id");
CREATE INDEX "audit_events_project_id_action_id_idx" ON "audit_events"("project_id", "action", "id");
CREATE INDEX "events_project_id_id_idx" ON "events"("project_id", "id");
CREATE INDEX "webhook_deliveries_webhook_id_id_idx" ON "webhook_deliveries"("webhook_id", "id");
CREATE INDEX "webhook_deliveries_status_next_attempt_at_idx" ON "webhook_deliveries"("status", "next_attempt_at");
CREATE INDEX "webhook_attempts_delivery_id_attempt_idx" ON "webhook_attempts"("delivery_id", "attempt");
CREATE INDEX "usage_records_project_id_request_id_idx" ON "usage_records"("project_id", "request_id");
CREATE INDEX "usage_records_project_id_created_at_idx" ON "usage_records"("project_id", "created_at");
-- The daily summary and the operator's usage filter select on created_at alone.
CREATE INDEX "usage_records_created_at_idx" ON "usage_records"("created_at");

ALTER TABLE "audit_events" ADD CONSTRAINT "audit_events_project_id_fkey" FOREIGN KEY ("project_id") REFERENCES "projects"("id") ON DELETE SET NULL ON UPDATE CASCADE;
ALTER TABLE "events" ADD CONSTRAINT "events_project_id_fkey" FOREIGN KEY ("project_id") REFERENCES "projects"("id") ON DELETE RESTRICT ON UPDATE CASCADE;
ALTER TABLE "webhook_deliveries" ADD CONSTRAINT "webhook_deliveries_webhook_id_fkey" FOREIGN KEY ("webhook_id") REFERENCES "webhooks"("id") ON DELETE RESTRICT ON UPDATE CASCADE;
ALTER TABLE "usage_records" ADD CONSTRAINT "usage_records_project_id_fkey" FOREIGN KEY ("project_id") REFERENCES "projects"("id") ON DELETE RESTRICT ON UPDATE CASCADE;

-- Exact dedup of usage records on request_id, whatever month a duplicate would fall in.
CREATE TABLE "usage_request_ids" (
    "request_id" TEXT NOT NULL,
    "created_at" TIMESTAMPTZ(3) NOT NULL,

    CONSTRAINT "usage_request_ids_pkey" PRIMARY KEY ("request_id")
);
CREATE INDEX "usage_request_ids_created_at_idx" ON "usage_request_ids"("created_at");

-- SET search_path FROM CURRENT: the function finds usage_request_ids in this schema whatever the caller's search_path.
CREATE FUNCTION "usage_records_dedup"() RETURNS trigger LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
  INSERT INTO "usage_request_ids" ("request_id", "created_at") VALUES (NEW."request_id", NEW."created_at")
    ON CONFLICT ("request_id") DO NOTHING;
  IF NOT FOUND THEN
    RETURN NULL; -- this request id has a usage record already: the row is skipped, like ON CONFLICT DO NOTHING
  END IF;
  RETURN NEW;
END
$$;
CREATE TRIGGER "usage_records_dedup" BEFORE INSERT ON "usage_records"
    FOR EACH ROW EXECUTE FUNCTION "usage_records_dedup"();

-- Partitions: every month (UTC) that holds rows, the current month and the next two, and DEFAULT.
DO $$
DECLARE
  t record;
  m timestamp;
BEGIN
  FOR t IN SELECT * FROM (VALUES
      ('usage_records', 'created_at'), ('events', 'created_at'), ('webhook_deliveries', 'created_at'),
      ('webhook_attempts', 'attempted_at'), ('audit_events', 'created_at')) AS x(name, col)
  LOOP
    FOR m IN EXECUTE format(
        'SELECT DISTINCT date_trunc(''month'', %I AT TIME ZONE ''UTC'') FROM %I
         UNION SELECT date_trunc(''month'', now() AT TIME ZONE ''UTC'') + make_interval(months => k) FROM generate_series(0, 2) AS k',
        t.col, t.name || '_unpartitioned')
    LOOP
      EXECUTE format('CREATE TABLE %I PARTITION OF %I FOR VALUES FROM (%L) TO (%L)',
        t.name || '_p' || to_char(m, 'YYYYMM'), t.name,
        to_char(m, 'YYYY-MM-DD') || ' 00:00:00+00', to_char(m + interval '1 month', 'YYYY-MM-DD') || ' 00:00:00+00');
    END LOOP;
    EXECUTE format('CREATE TABLE %I PARTITION OF %I DEFAULT', t.name || '_default', t.name);
  END LOOP;
END
$$;

-- Copy every row (usage_records through the trigger, which fills usage_request_ids), then drop the old tables.
INSERT INTO "usage_records" SELECT * FROM "usage_records_unpartitioned";
INSERT INTO "events" SELECT * FROM "events_unpartitioned";
INSERT INTO "webhook_deliveries" SELECT * FROM "webhook_deliveries_unpartitioned";
INSERT INTO "webhook_attempts" SELECT * FROM "webhook_attempts_unpartitioned";
INSERT INTO "audit_events" SELECT * FROM "audit_events_unpartitioned";

DROP TABLE "usage_records_unpartitioned";
DROP TABLE "events_unpartitioned";
DROP TABLE "webhook_deliveries_unpartitioned";
DROP TABLE "webhook_attempts_unpartitioned";
DROP TABLE "audit_events_unpartitioned";
