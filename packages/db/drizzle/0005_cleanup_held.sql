ALTER TABLE `workspaces` ADD `cleanup_held` text;--> statement-breakpoint
ALTER TABLE `workspaces` ADD `keep_checkout_on_close` integer;