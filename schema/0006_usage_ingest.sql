-- What POST /v1/usage and GET /v1/usage need beyond 0004: a row id, in
-- arrival order, for paging the list (the number (node, epoch, seq) is the
-- key but pages badly across nodes), and an index for a team's or a
-- contract's newest reports. The meaning of every 0004 column is unchanged.
ALTER TABLE usage_reports ADD COLUMN id bigserial;
CREATE UNIQUE INDEX usage_reports_id ON usage_reports (id);
CREATE INDEX usage_conflicts_node ON usage_conflicts (node_id, epoch, seq);
