CREATE TABLE "web_sessions" (
	"id_hash" text PRIMARY KEY NOT NULL,
	"token_name" text NOT NULL,
	"created_at" bigint NOT NULL,
	"expires_at" bigint NOT NULL
);
--> statement-breakpoint
CREATE INDEX "web_sessions_token" ON "web_sessions" USING btree ("token_name");