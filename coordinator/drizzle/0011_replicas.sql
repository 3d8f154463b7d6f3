CREATE TABLE `agent_replicas` (
	`agent_id` text PRIMARY KEY NOT NULL,
	`replica_id` text NOT NULL,
	`token_name` text NOT NULL,
	`since` integer NOT NULL
);
--> statement-breakpoint
CREATE INDEX `agent_replicas_replica` ON `agent_replicas` (`replica_id`);--> statement-breakpoint
CREATE TABLE `replicas` (
	`id` text PRIMARY KEY NOT NULL,
	`url` text NOT NULL,
	`secret_hash` text NOT NULL,
	`started_at` integer NOT NULL,
	`heartbeat_at` integer NOT NULL
);
--> statement-breakpoint
ALTER TABLE `lease_waiters` ADD `replica_id` text;