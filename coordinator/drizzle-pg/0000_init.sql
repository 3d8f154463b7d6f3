CREATE TABLE "activity" (
	"id" bigserial PRIMARY KEY NOT NULL,
	"at" bigint NOT NULL,
	"caller" text NOT NULL,
	"lease_id" text NOT NULL,
	"serial" text NOT NULL,
	"physical_id" text NOT NULL,
	"agent_id" text NOT NULL,
	"command" text NOT NULL,
	"outcome" text NOT NULL,
	"duration_ms" bigint NOT NULL,
	"request_id" text NOT NULL,
	"detail" text NOT NULL
);
--> statement-breakpoint
CREATE TABLE "agents" (
	"id" text PRIMARY KEY NOT NULL,
	"name" text NOT NULL,
	"hostname" text NOT NULL,
	"agent_version" text NOT NULL,
	"protocol_version" integer NOT NULL,
	"adb_version" text NOT NULL,
	"heartbeat_interval_ms" integer NOT NULL,
	"connected_at" bigint,
	"last_heartbeat_at" bigint
);
--> statement-breakpoint
CREATE TABLE "device_claims" (
	"key" text NOT NULL,
	"agent_id" text NOT NULL,
	"status" text NOT NULL,
	"created_at" bigint NOT NULL,
	"decided_by" text,
	"decided_at" bigint,
	CONSTRAINT "device_claims_key_agent_id_pk" PRIMARY KEY("key","agent_id")
);
--> statement-breakpoint
CREATE TABLE "device_labels" (
	"physical_id" text NOT NULL,
	"key" text NOT NULL,
	"value" text NOT NULL,
	CONSTRAINT "device_labels_physical_id_key_pk" PRIMARY KEY("physical_id","key")
);
--> statement-breakpoint
CREATE TABLE "devices" (
	"agent_id" text NOT NULL,
	"serial" text NOT NULL,
	"state" text NOT NULL,
	"properties" jsonb NOT NULL,
	"updated_at" bigint NOT NULL,
	CONSTRAINT "devices_agent_id_serial_pk" PRIMARY KEY("agent_id","serial")
);
--> statement-breakpoint
CREATE TABLE "evidence" (
	"evidence_id" text PRIMARY KEY NOT NULL,
	"kind" text NOT NULL,
	"status" text NOT NULL,
	"label" text,
	"serial" text NOT NULL,
	"physical_id" text NOT NULL,
	"agent_id" text NOT NULL,
	"created_at" bigint NOT NULL,
	"total_bytes" bigint NOT NULL,
	"manifest_sha256" text NOT NULL
);
--> statement-breakpoint
CREATE TABLE "evidence_grants" (
	"evidence_id" text PRIMARY KEY NOT NULL,
	"kind" text NOT NULL,
	"agent_id" text NOT NULL,
	"agent_token" text NOT NULL,
	"serial" text NOT NULL,
	"physical_id" text NOT NULL,
	"requested_by" text NOT NULL,
	"issued_at" bigint NOT NULL
);
--> statement-breakpoint
CREATE TABLE "lease_waiters" (
	"ticket" text PRIMARY KEY NOT NULL,
	"seq" bigint NOT NULL,
	"holder" text NOT NULL,
	"selector" jsonb NOT NULL,
	"enqueued_at" bigint NOT NULL,
	"wait_deadline" bigint NOT NULL,
	"ttl_ms" bigint NOT NULL
);
--> statement-breakpoint
CREATE TABLE "leases" (
	"lease_id" text PRIMARY KEY NOT NULL,
	"token_hash" text NOT NULL,
	"holder" text NOT NULL,
	"physical_id" text NOT NULL,
	"agent_id" text NOT NULL,
	"serial" text NOT NULL,
	"acquired_at" bigint NOT NULL,
	"expires_at" bigint NOT NULL,
	"ttl_ms" bigint NOT NULL,
	"state" text NOT NULL,
	"ended_at" bigint,
	CONSTRAINT "leases_token_hash_unique" UNIQUE("token_hash")
);
--> statement-breakpoint
CREATE TABLE "session_images" (
	"session_id" text NOT NULL,
	"sha256" text NOT NULL,
	"size" bigint NOT NULL,
	"width" integer NOT NULL,
	"height" integer NOT NULL,
	"mime_type" text DEFAULT 'image/png' NOT NULL,
	CONSTRAINT "session_images_session_id_sha256_pk" PRIMARY KEY("session_id","sha256")
);
--> statement-breakpoint
CREATE TABLE "session_steps" (
	"session_id" text NOT NULL,
	"sequence" integer NOT NULL,
	"record" text NOT NULL,
	"ocr" text,
	"created_at" bigint NOT NULL,
	CONSTRAINT "session_steps_session_id_sequence_pk" PRIMARY KEY("session_id","sequence")
);
--> statement-breakpoint
CREATE TABLE "sessions" (
	"session_id" text PRIMARY KEY NOT NULL,
	"name" text NOT NULL,
	"physical_id" text NOT NULL,
	"serial" text NOT NULL,
	"agent_id" text NOT NULL,
	"lease_id" text NOT NULL,
	"owner" text NOT NULL,
	"status" text NOT NULL,
	"created_at" bigint NOT NULL,
	"ended_at" bigint,
	"step_count" integer DEFAULT 0 NOT NULL,
	"context" jsonb NOT NULL,
	"ocr" boolean NOT NULL,
	"failed_step_count" integer DEFAULT 0 NOT NULL,
	"policy_json" text DEFAULT '' NOT NULL,
	"policy_sha256" text DEFAULT '' NOT NULL,
	"secret_names" jsonb DEFAULT '[]'::jsonb NOT NULL
);
--> statement-breakpoint
CREATE TABLE "tokens" (
	"name" text PRIMARY KEY NOT NULL,
	"kind" text NOT NULL,
	"admin" boolean DEFAULT false NOT NULL,
	"hash" text NOT NULL,
	"created_at" bigint NOT NULL,
	"revoked_at" bigint,
	"role" text,
	"agent_id" text,
	CONSTRAINT "tokens_hash_unique" UNIQUE("hash")
);
--> statement-breakpoint
CREATE TABLE "video_sessions" (
	"session_id" text PRIMARY KEY NOT NULL,
	"agent_id" text NOT NULL,
	"serial" text NOT NULL,
	"physical_id" text NOT NULL,
	"requested_by" text NOT NULL,
	"created_at" bigint NOT NULL,
	"updated_at" bigint NOT NULL,
	"status" text NOT NULL,
	"code" text NOT NULL,
	"message" text NOT NULL,
	"worker_available" boolean NOT NULL,
	"recovery_state" text NOT NULL,
	"manifest_json" text NOT NULL
);
--> statement-breakpoint
ALTER TABLE "devices" ADD CONSTRAINT "devices_agent_id_agents_id_fk" FOREIGN KEY ("agent_id") REFERENCES "public"."agents"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "evidence_created" ON "evidence" USING btree ("created_at","evidence_id");--> statement-breakpoint
CREATE INDEX "evidence_grants_requested_by" ON "evidence_grants" USING btree ("requested_by");--> statement-breakpoint
CREATE UNIQUE INDEX "leases_one_active" ON "leases" USING btree ("physical_id") WHERE state = 'active';--> statement-breakpoint
CREATE INDEX "sessions_created" ON "sessions" USING btree ("created_at","session_id");--> statement-breakpoint
CREATE INDEX "sessions_lease" ON "sessions" USING btree ("lease_id");--> statement-breakpoint
CREATE INDEX "video_sessions_created" ON "video_sessions" USING btree ("created_at","session_id");