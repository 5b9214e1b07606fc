ALTER TABLE `workspaces` ADD `pr_url` text;--> statement-breakpoint
ALTER TABLE `workspaces` ADD `pr_number` integer;--> statement-breakpoint
ALTER TABLE `workspaces` ADD `pr_state` text;