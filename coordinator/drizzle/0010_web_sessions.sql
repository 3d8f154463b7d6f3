CREATE TABLE `web_sessions` (
	`id_hash` text PRIMARY KEY NOT NULL,
	`token_name` text NOT NULL,
	`created_at` integer NOT NULL,
	`expires_at` integer NOT NULL
);
--> statement-breakpoint
CREATE INDEX `web_sessions_token` ON `web_sessions` (`token_name`);