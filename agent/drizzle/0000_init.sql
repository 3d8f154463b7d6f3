CREATE TABLE `actions` (
	`action_id` text PRIMARY KEY NOT NULL,
	`physical_id` text NOT NULL,
	`serial` text NOT NULL,
	`kind` text NOT NULL,
	`request_sha256` text NOT NULL,
	`request_json` text NOT NULL,
	`state` text NOT NULL,
	`dispatched` integer,
	`ambiguous` integer DEFAULT false NOT NULL,
	`boot_id` text NOT NULL,
	`created_at` integer NOT NULL,
	`deadline_at` integer NOT NULL,
	`settled_at` integer,
	`receipt_json` text DEFAULT '' NOT NULL,
	`settled_by` text DEFAULT '' NOT NULL,
	`abandon_reason` text DEFAULT '' NOT NULL,
	`abandoned_by` text DEFAULT '' NOT NULL,
	`error_message` text DEFAULT '' NOT NULL,
	`requested_by` text DEFAULT '' NOT NULL,
	`size` integer NOT NULL
);
--> statement-breakpoint
CREATE INDEX `actions_physical_created` ON `actions` (`physical_id`,`created_at`);--> statement-breakpoint
CREATE INDEX `actions_state` ON `actions` (`state`);--> statement-breakpoint
CREATE TABLE `boot_ids` (
	`physical_id` text PRIMARY KEY NOT NULL,
	`boot_id` text NOT NULL,
	`seen_at` integer NOT NULL
);
--> statement-breakpoint
CREATE TABLE `device_events` (
	`id` integer PRIMARY KEY AUTOINCREMENT NOT NULL,
	`physical_id` text NOT NULL,
	`serial` text NOT NULL,
	`kind` text NOT NULL,
	`detail` text NOT NULL,
	`at` integer NOT NULL
);
--> statement-breakpoint
CREATE INDEX `device_events_physical` ON `device_events` (`physical_id`,`at`);--> statement-breakpoint
CREATE TABLE `pins` (
	`serial` text PRIMARY KEY NOT NULL,
	`label` text NOT NULL,
	`created_at` integer NOT NULL
);
