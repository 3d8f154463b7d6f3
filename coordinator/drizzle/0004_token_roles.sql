ALTER TABLE `tokens` ADD `role` text;--> statement-breakpoint
ALTER TABLE `tokens` ADD `agent_id` text;--> statement-breakpoint
-- Existing user tokens keep what they could do: admin tokens are admins, the others operators.
UPDATE `tokens` SET `role` = CASE WHEN `admin` THEN 'admin' ELSE 'operator' END WHERE `kind` = 'user';
