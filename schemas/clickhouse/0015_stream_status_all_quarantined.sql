-- `all-quarantined` as a stored stream status (issue 27): a closed stream whose every
-- evaluation was rejected. Until now the completeness job told it apart only when it
-- answered; `stream_status` said `closed-complete`, so a dashboard reading the table
-- disagreed with the CLI. Adding a value at the end of an Enum8 changes metadata only
-- (no part is rewritten: online on chDB and on a server), and the statement is the same
-- whether it ran before or not, so re-running it after a crash is safe.
ALTER TABLE holonograph.stream_status
    MODIFY COLUMN status Enum8('open' = 1, 'closed-complete' = 2, 'closed-lossy' = 3, 'dead' = 4, 'all-quarantined' = 5);
