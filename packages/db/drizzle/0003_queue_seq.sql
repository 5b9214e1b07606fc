ALTER TABLE `workspaces` ADD `queue_seq` integer;--> statement-breakpoint
CREATE INDEX `workspaces_queue` ON `workspaces` (`state`,`queue_seq`);