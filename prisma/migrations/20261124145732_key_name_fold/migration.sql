-- Key names are unique among a project's non-revoked keys ignoring case (issue 14): api_keys.active_name now holds
-- the case-folded name (src/domain/keys/names.ts keyNameFold), so the existing unique index on
-- (project_id, active_name) enforces it. Data only: the tables and indexes do not change.
--
-- 1. Of active keys whose names differ only in case, the oldest keeps the folded name; the others get a folded name
--    that no new key can take (names cannot contain control characters) and that stays unique (it ends with the id).
--    Nothing else about those keys changes; they keep working.
UPDATE "api_keys" AS k
SET "active_name" = lower(k."active_name") || chr(1) || k."id"
WHERE k."active_name" IS NOT NULL
  AND EXISTS (
    SELECT 1 FROM "api_keys" AS o
    WHERE o."project_id" = k."project_id"
      AND o."active_name" IS NOT NULL
      AND lower(o."active_name") = lower(k."active_name")
      AND o."id" < k."id"
  );

-- 2. Every other active key: its name folded. lower() folds what the database's locale knows (ASCII at least);
--    names are folded by the gateway from now on.
UPDATE "api_keys"
SET "active_name" = lower("active_name")
WHERE "active_name" IS NOT NULL AND strpos("active_name", chr(1)) = 0;
