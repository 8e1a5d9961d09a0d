"""Compaction: finished units' small shards merged into large files, exactly once and resumable.

A unit stays small (a cheap retry), so a large dataset is millions of small shards; compaction merges whole
units, in order, into *groups*: a group is a run of consecutive units (of the candidates, see below) that
closes before any table's file would pass `target_bytes`, and it writes one file per table,
`{table}/compact-{group:05d}.parquet`, with row groups of about `row_group_bytes` uncompressed. A unit's
rows of every table are in the same group (pack and rederive-go read a unit's tables together), and each
unit's completion record then lists, per table, its *slice* of the group's file (ShardInfo offset, rows,
file_rows). The manifest lists each file once (pipeline/engine/dataset.py).

Candidates, in the order of the records given (unit order; a refresh's planned order):
- loose units (their own shards), when the settings want them compacted (`CompactionSettings.wanted`);
- survivors: the units of a *broken* group, one some of whose rows no listed unit claims any more (a unit
  that re-ran, a refresh's dropped unit). A broken group's files cannot be listed, so its survivors are
  always compacted again, read by slice from the old files.

The protocol (a crash anywhere re-runs to the same files, nothing lost or doubled):
1. plan: the groups, their members and sources, written to `_compaction/` (group plans, then `plan.json`
   last: the pending marker). A pending plan is resumed as it is, never re-planned.
2. one Ray task per group writes its files (temp name, then rename; the same sources give the same bytes),
   then its group record `_compaction/{group:05d}.done.json`, then (jobs) its members' new completion
   records; a task whose group record exists skips the writing.
3. the caller writes the manifest from the new records (the commit point), then calls `finish`:
   `plan.json` turns to phase "cleanup", the sources no committed record lists any more (inside the
   dataset directory only: a refresh never deletes an earlier version's files) are deleted, then the plan.

The modules, one job each:
- `settings`: when to compact and how large (`CompactionSettings`);
- `files`: where the compacted files and the plan's files lie, and the sweep of unlisted compacted files;
- `estimates`: how large a unit's shards will be once merged (merge ratios learnt from a sample);
- `groups`: which units are candidates and how they fall into groups;
- `plan`: the persisted plan (steps 1 and 3): written, resumed or abandoned, finished;
- `group_task`: the Ray task that writes one group (step 2);
- `commit`: the driver's sequence, compact then publish the manifest then finish (`compact_and_commit`).
"""
