CREATE TABLE "agent_replicas" (
	"agent_id" text PRIMARY KEY NOT NULL,
	"replica_id" text NOT NULL,
	"token_name" text NOT NULL,
	"since" bigint NOT NULL
);
--> statement-breakpoint
CREATE TABLE "replicas" (
	"id" text PRIMARY KEY NOT NULL,
	"url" text NOT NULL,
	"secret_hash" text NOT NULL,
	"started_at" bigint NOT NULL,
	"heartbeat_at" bigint NOT NULL
);
--> statement-breakpoint
ALTER TABLE "lease_waiters" ADD COLUMN "replica_id" text;--> statement-breakpoint
CREATE INDEX "agent_replicas_replica" ON "agent_replicas" USING btree ("replica_id");