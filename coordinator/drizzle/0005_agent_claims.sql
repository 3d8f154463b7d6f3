CREATE TABLE `device_claims` (
	`key` text NOT NULL,
	`agent_id` text NOT NULL,
	`status` text NOT NULL,
	`created_at` integer NOT NULL,
	`decided_by` text,
	`decided_at` integer,
	PRIMARY KEY(`key`, `agent_id`)
);
--> statement-breakpoint
CREATE TABLE `evidence_grants` (
	`evidence_id` text PRIMARY KEY NOT NULL,
	`kind` text NOT NULL,
	`agent_id` text NOT NULL,
	`agent_token` text NOT NULL,
	`serial` text NOT NULL,
	`physical_id` text NOT NULL,
	`requested_by` text NOT NULL,
	`issued_at` integer NOT NULL
);
--> statement-breakpoint
CREATE INDEX `evidence_grants_requested_by` ON `evidence_grants` (`requested_by`);--> statement-breakpoint
-- What agents already reported before claims existed stays theirs: no alias a lab already uses is quarantined by the upgrade.
INSERT OR IGNORE INTO `device_claims` (`key`, `agent_id`, `status`, `created_at`) SELECT 'serial:' || `serial`, `agent_id`, 'owner', `updated_at` FROM `devices`;--> statement-breakpoint
INSERT OR IGNORE INTO `device_claims` (`key`, `agent_id`, `status`, `created_at`) SELECT 'physical:' || json_extract(`properties`, '$.physicalId'), `agent_id`, 'owner', `updated_at` FROM `devices` WHERE coalesce(json_extract(`properties`, '$.physicalId'), '') <> '';
