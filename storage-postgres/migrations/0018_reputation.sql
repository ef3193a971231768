-- The reputation guard's standings (issue #34): one row per workspace and scope
-- ('workspace', or a sending domain's id), changed only by compare-and-swap on `version`
-- so that a change and the webhook event announcing it happen once across every node.
CREATE TABLE reputation (
    workspace_id uuid NOT NULL,
    scope        text NOT NULL,
    version      bigint NOT NULL,
    doc          jsonb NOT NULL,
    PRIMARY KEY (workspace_id, scope)
);
