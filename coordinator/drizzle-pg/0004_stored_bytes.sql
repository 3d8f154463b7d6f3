CREATE TABLE "blobs" (
	"id" text PRIMARY KEY NOT NULL,
	"owner" text NOT NULL,
	"size" bigint NOT NULL,
	"sha256" text NOT NULL,
	"name" text NOT NULL,
	"created_at" bigint NOT NULL
);
--> statement-breakpoint
CREATE TABLE "stored_chunks" (
	"key" text NOT NULL,
	"seq" integer NOT NULL,
	"data" "bytea" NOT NULL,
	CONSTRAINT "stored_chunks_key_seq_pk" PRIMARY KEY("key","seq")
);
--> statement-breakpoint
CREATE TABLE "stored_files" (
	"key" text PRIMARY KEY NOT NULL,
	"size" bigint NOT NULL,
	"sha256" text NOT NULL,
	"created_at" bigint NOT NULL
);
--> statement-breakpoint
CREATE INDEX "blobs_owner" ON "blobs" USING btree ("owner");--> statement-breakpoint
CREATE INDEX "blobs_created" ON "blobs" USING btree ("created_at");