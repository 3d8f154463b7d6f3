CREATE TABLE `agents` (
	`id` text PRIMARY KEY NOT NULL,
	`name` text NOT NULL,
	`hostname` text NOT NULL,
	`agent_version` text NOT NULL,
	`protocol_version` integer NOT NULL,
	`adb_version` text NOT NULL,
	`heartbeat_interval_ms` integer NOT NULL,
	`connected_at` integer,
	`last_heartbeat_at` integer
);
--> statement-breakpoint
CREATE TABLE `devices` (
	`agent_id` text NOT NULL,
	`serial` text NOT NULL,
	`state` text NOT NULL,
	`properties` text NOT NULL,
	`updated_at` integer NOT NULL,
	PRIMARY KEY(`agent_id`, `serial`),
	FOREIGN KEY (`agent_id`) REFERENCES `agents`(`id`) ON UPDATE no action ON DELETE cascade
);
--> statement-breakpoint
CREATE TABLE `tokens` (
	`name` text PRIMARY KEY NOT NULL,
	`kind` text NOT NULL,
	`admin` integer DEFAULT false NOT NULL,
	`hash` text NOT NULL,
	`created_at` integer NOT NULL,
	`revoked_at` integer
);
--> statement-breakpoint
CREATE UNIQUE INDEX `tokens_hash_unique` ON `tokens` (`hash`);