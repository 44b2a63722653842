-- CreateTable
CREATE TABLE "operators" (
    "id" TEXT NOT NULL,
    "user_name" TEXT NOT NULL,
    "user_name_key" TEXT NOT NULL,
    "external_id" TEXT,
    "display_name" TEXT,
    "email" TEXT,
    "active" BOOLEAN NOT NULL DEFAULT true,
    "created_at" TIMESTAMPTZ(3) NOT NULL,
    "updated_at" TIMESTAMPTZ(3) NOT NULL,

    CONSTRAINT "operators_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "operator_groups" (
    "id" TEXT NOT NULL,
    "display_name" TEXT NOT NULL,
    "display_name_key" TEXT NOT NULL,
    "external_id" TEXT,
    "created_at" TIMESTAMPTZ(3) NOT NULL,
    "updated_at" TIMESTAMPTZ(3) NOT NULL,

    CONSTRAINT "operator_groups_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "operator_group_members" (
    "group_id" TEXT NOT NULL,
    "operator_id" TEXT NOT NULL,

    CONSTRAINT "operator_group_members_pkey" PRIMARY KEY ("group_id","operator_id")
);

-- CreateTable
CREATE TABLE "operator_group_roles" (
    "group_id" TEXT NOT NULL,
    "project_id" TEXT NOT NULL,
    "role" TEXT NOT NULL,

    CONSTRAINT "operator_group_roles_pkey" PRIMARY KEY ("group_id","project_id")
);

-- CreateTable
CREATE TABLE "operator_sessions" (
    "id" TEXT NOT NULL,
    "token_hash" TEXT NOT NULL,
    "csrf_hash" TEXT NOT NULL,
    "operator_id" TEXT NOT NULL,
    "method" TEXT NOT NULL,
    "ip" TEXT,
    "created_at" TIMESTAMPTZ(3) NOT NULL,
    "last_seen_at" TIMESTAMPTZ(3) NOT NULL,
    "expires_at" TIMESTAMPTZ(3) NOT NULL,

    CONSTRAINT "operator_sessions_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "project_ip_allowlists" (
    "project_id" TEXT NOT NULL,
    "cidrs" TEXT[],
    "updated_at" TIMESTAMPTZ(3) NOT NULL,

    CONSTRAINT "project_ip_allowlists_pkey" PRIMARY KEY ("project_id")
);

-- CreateIndex
CREATE UNIQUE INDEX "operators_user_name_key_key" ON "operators"("user_name_key");

-- CreateIndex
CREATE UNIQUE INDEX "operator_groups_display_name_key_key" ON "operator_groups"("display_name_key");

-- CreateIndex
CREATE INDEX "operator_group_members_operator_id_idx" ON "operator_group_members"("operator_id");

-- CreateIndex
CREATE UNIQUE INDEX "operator_sessions_token_hash_key" ON "operator_sessions"("token_hash");

-- CreateIndex
CREATE INDEX "operator_sessions_operator_id_idx" ON "operator_sessions"("operator_id");

-- AddForeignKey
ALTER TABLE "operator_group_members" ADD CONSTRAINT "operator_group_members_group_id_fkey" FOREIGN KEY ("group_id") REFERENCES "operator_groups"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "operator_group_members" ADD CONSTRAINT "operator_group_members_operator_id_fkey" FOREIGN KEY ("operator_id") REFERENCES "operators"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "operator_group_roles" ADD CONSTRAINT "operator_group_roles_group_id_fkey" FOREIGN KEY ("group_id") REFERENCES "operator_groups"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "operator_sessions" ADD CONSTRAINT "operator_sessions_operator_id_fkey" FOREIGN KEY ("operator_id") REFERENCES "operators"("id") ON DELETE CASCADE ON UPDATE CASCADE;
