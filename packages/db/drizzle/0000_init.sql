CREATE TABLE `events` (
	`id` integer PRIMARY KEY AUTOINCREMENT NOT NULL,
	`slug` text NOT NULL,
	`type` text NOT NULL,
	`data` text NOT NULL,
	`at` text NOT NULL
);
--> statement-breakpoint
CREATE INDEX `events_slug_id` ON `events` (`slug`,`id`);--> statement-breakpoint
CREATE TABLE `projects` (
	`name` text PRIMARY KEY NOT NULL,
	`source` text NOT NULL,
	`default_branch` text NOT NULL,
	`created_at` text NOT NULL
);
--> statement-breakpoint
CREATE TABLE `workspaces` (
	`id` integer PRIMARY KEY AUTOINCREMENT NOT NULL,
	`slug` text NOT NULL,
	`project` text NOT NULL,
	`name` text NOT NULL,
	`is_default` integer DEFAULT false NOT NULL,
	`branch` text NOT NULL,
	`base_ref` text NOT NULL,
	`state` text NOT NULL,
	`failure_reason` text,
	`container_id` text,
	`agent_session_id` text,
	`worktree_path` text,
	`created_at` text NOT NULL,
	`updated_at` text NOT NULL,
	`last_activity_at` text,
	FOREIGN KEY (`project`) REFERENCES `projects`(`name`) ON UPDATE no action ON DELETE no action
);
--> statement-breakpoint
CREATE UNIQUE INDEX `workspaces_live_slug` ON `workspaces` (`slug`) WHERE "workspaces"."state" IN ('creating', 'running', 'stopped', 'tearing-down');--> statement-breakpoint
CREATE INDEX `workspaces_project` ON `workspaces` (`project`);