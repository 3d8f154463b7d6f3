CREATE TABLE `activity` (
	`id` integer PRIMARY KEY AUTOINCREMENT NOT NULL,
	`at` integer NOT NULL,
	`caller` text NOT NULL,
	`lease_id` text NOT NULL,
	`serial` text NOT NULL,
	`physical_id` text NOT NULL,
	`agent_id` text NOT NULL,
	`command` text NOT NULL,
	`outcome` text NOT NULL,
	`duration_ms` integer NOT NULL,
	`request_id` text NOT NULL,
	`detail` text NOT NULL
);
--> statement-breakpoint
CREATE TABLE `device_labels` (
	`physical_id` text NOT NULL,
	`key` text NOT NULL,
	`value` text NOT NULL,
	PRIMARY KEY(`physical_id`, `key`)
);
--> statement-breakpoint
CREATE TABLE `lease_waiters` (
	`ticket` text PRIMARY KEY NOT NULL,
	`seq` integer NOT NULL,
	`holder` text NOT NULL,
	`selector` text NOT NULL,
	`enqueued_at` integer NOT NULL,
	`wait_deadline` integer NOT NULL,
	`ttl_ms` integer NOT NULL
);
--> statement-breakpoint
CREATE TABLE `leases` (
	`lease_id` text PRIMARY KEY NOT NULL,
	`token_hash` text NOT NULL,
	`holder` text NOT NULL,
	`physical_id` text NOT NULL,
	`agent_id` text NOT NULL,
	`serial` text NOT NULL,
	`acquired_at` integer NOT NULL,
	`expires_at` integer NOT NULL,
	`ttl_ms` integer NOT NULL,
	`state` text NOT NULL,
	`ended_at` integer
);
--> statement-breakpoint
CREATE UNIQUE INDEX `leases_token_hash_unique` ON `leases` (`token_hash`);--> statement-breakpoint
CREATE UNIQUE INDEX `leases_one_active` ON `leases` (`physical_id`) WHERE state = 'active';