CREATE TABLE `evidence` (
	`evidence_id` text PRIMARY KEY NOT NULL,
	`kind` text NOT NULL,
	`status` text NOT NULL,
	`label` text,
	`serial` text NOT NULL,
	`physical_id` text NOT NULL,
	`agent_id` text NOT NULL,
	`created_at` integer NOT NULL,
	`total_bytes` integer NOT NULL,
	`manifest_sha256` text NOT NULL
);
