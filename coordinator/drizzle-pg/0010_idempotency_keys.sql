CREATE TABLE "idempotency_keys" (
	"caller" text NOT NULL,
	"request_id" text NOT NULL,
	"fingerprint" text NOT NULL,
	"state" text NOT NULL,
	"owner" text NOT NULL,
	"answer" text,
	"error" text,
	"created_at" bigint NOT NULL,
	"expires_at" bigint NOT NULL,
	CONSTRAINT "idempotency_keys_caller_request_id_pk" PRIMARY KEY("caller","request_id")
);
--> statement-breakpoint
CREATE INDEX "idempotency_keys_expiry" ON "idempotency_keys" USING btree ("expires_at");