-- CreateTable
CREATE TABLE "usage_daily" (
    "project_id" TEXT NOT NULL,
    "dimension" TEXT NOT NULL,
    "day" DATE NOT NULL,
    "value" TEXT NOT NULL,
    "requests" BIGINT NOT NULL,
    "prompt_tokens" BIGINT NOT NULL,
    "completion_tokens" BIGINT NOT NULL,
    "cost_micros" BIGINT NOT NULL,

CONSTRAINT "usage_daily_pkey" PRIMARY KEY ("project_id","dimension","day","value")
);

-- Each INSERT into usage_records (a batch of the outcome writer, or any other writer) adds its rows' figures to the
-- day's row of each dimension in one statement, in the same transaction. Duplicates skipped by usage_records_dedup
-- never reach the transition table. ORDER BY: concurrent batches take the rows' locks in one order (no deadlock).
-- SET search_path FROM CURRENT: the function finds usage_daily in this schema whatever the caller's search_path.
CREATE FUNCTION "usage_daily_add"() RETURNS trigger LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
  INSERT INTO "usage_daily" ("project_id", "dimension", "day", "value", "requests", "prompt_tokens", "completion_tokens", "cost_micros")
  SELECT n."project_id", d.dimension, (n."created_at" AT TIME ZONE 'UTC')::date, d.value,
         count(*), coalesce(sum(n."prompt_tokens"), 0), coalesce(sum(n."completion_tokens"), 0), coalesce(sum(n."cost_micros"), 0)
    FROM "inserted_usage" n
   CROSS JOIN LATERAL (VALUES ('key', n."key_id"), ('model', n."model"), ('customer', coalesce(n."customer", '')),
                              ('route', coalesce(n."route", '')), ('status', n."status")) AS d(dimension, value)
   GROUP BY 1, 2, 3, 4
   ORDER BY 1, 2, 3, 4
  ON CONFLICT ("project_id", "dimension", "day", "value") DO UPDATE SET
    "requests" = "usage_daily"."requests" + excluded."requests",
    "prompt_tokens" = "usage_daily"."prompt_tokens" + excluded."prompt_tokens",
    "completion_tokens" = "usage_daily"."completion_tokens" + excluded."completion_tokens",
    "cost_micros" = "usage_daily"."cost_micros" + excluded."cost_micros";
  RETURN NULL;
END
$$;
CREATE TRIGGER "usage_daily_add" AFTER INSERT ON "usage_records"
    REFERENCING NEW TABLE AS "inserted_usage" FOR EACH STATEMENT EXECUTE FUNCTION "usage_daily_add"();

-- The usage recorded before this migration.
INSERT INTO "usage_daily" ("project_id", "dimension", "day", "value", "requests", "prompt_tokens", "completion_tokens", "cost_micros")
SELECT u."project_id", d.dimension, (u."created_at" AT TIME ZONE 'UTC')::date, d.value,
       count(*), coalesce(sum(u."prompt_tokens"), 0), coalesce(sum(u."completion_tokens"), 0), coalesce(sum(u."cost_micros"), 0)
  FROM "usage_records" u
 CROSS JOIN LATERAL (VALUES ('key', u."key_id"), ('model', u."model"), ('customer', coalesce(u."customer", '')),
                            ('route', coalesce(u."route", '')), ('status', u."status")) AS d(dimension, value)
 GROUP BY 1, 2, 3, 4;
