CREATE TABLE `device_cleanup` (
	`physical_id` text PRIMARY KEY NOT NULL,
	`state` text NOT NULL,
	`lease_id` text NOT NULL,
	`reason` text DEFAULT '' NOT NULL,
	`baseline` text DEFAULT '' NOT NULL,
	`since` integer NOT NULL
);
