-- Inputs and answers of a cluster's node-to-node commands too large for
-- one bus message (a prompt's attachments, a long session's messages):
-- the node that has one stores it here and sends its id instead; the node
-- that receives the command takes it (reads and deletes it). Rows left by
-- a node that died between the two are swept after a while.
CREATE TABLE cluster_blobs (
    id         text COLLATE "C" NOT NULL PRIMARY KEY,
    data       bytea            NOT NULL,
    created_at timestamptz      NOT NULL DEFAULT now()
);
CREATE INDEX cluster_blobs_created_at ON cluster_blobs (created_at);
