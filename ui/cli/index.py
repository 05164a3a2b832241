"""``paperchat ingest`` and ``paperchat stats``: build the index, and say what it holds."""

from __future__ import annotations

import json

from rag.errors import ConfigError
from rag.text import counted, say
from ui.cli.output import show, show_json
from ui.shared.commands import components_from_args

EXIT_REJECTED = 1  # ingest stored what it could but rejected some input
MAX_LISTED = 10  # paper ids named in a report line, at most


def cmd_ingest(args) -> int:
    if args.force and not args.rebuild:
        raise ConfigError("--force goes with --rebuild (rebuild even if papers are dropped): run "
                          "`paperchat ingest --rebuild --force [PATH...]`; a plain ingest drops no other file's papers")
    components = components_from_args(args)  # --json: no progress bar
    try:
        run = components.ingest_files(args.paths, rebuild=args.rebuild, force=args.force)
    except KeyboardInterrupt:
        # Stopped mid-write (a rebuild had dropped the index first): say what the index holds now, and how to
        # finish, before "interrupted".
        if resume := components.unfinished_ingest():
            papers, _chunks = components.store.counts()
            say(f"the ingest stopped before it finished: the index holds {counted(papers, 'paper')}, part of what "
                f"it was given; run `{resume}` to complete it")
        raise
    for dropped in run.dropped:
        say(f"dropped by --rebuild --force: {dropped}")
    if args.json:
        show_json(json.dumps(ingest_summary(run)))
        return EXIT_REJECTED if run.rejected else 0
    show(f"ingested {counted(run.papers, 'paper')} from {counted(run.files, 'file')} in {run.seconds:.1f}s: "
         f"{run.report.summary()}")
    updated = run.report.updated_ids
    if updated:
        more = f" and {len(updated) - MAX_LISTED} more" if len(updated) > MAX_LISTED else ""
        show(f"updated (changed in the same file since the last ingest): {', '.join(updated[:MAX_LISTED])}{more}")
    if run.rejected:
        say(run.problem_line)
        return EXIT_REJECTED
    return 0


def ingest_summary(run) -> dict:
    """``ingest --json``: what was read, what was written, what the index holds, and how fast (papers read
    per second of the whole command, reading the files included)."""
    report = run.report
    return {
        "files": run.files,
        "papers": run.papers,
        "rejected": run.rejected,
        "added": report.added,
        "updated": report.updated,
        "unchanged": report.unchanged,
        "removed": report.removed,
        "chunks": report.chunks_written,
        "index_papers": report.papers_in_index,
        "index_chunks": report.chunks_in_index,
        "seconds": round(run.seconds, 3),
        "papers_per_s": round(run.papers / run.seconds, 2) if run.seconds > 0 else None,
        "updated_ids": report.updated_ids,
    }


def cmd_stats(args) -> int:
    components = components_from_args(args)
    store = components.store
    papers, chunks = store.counts()
    manifest = store.manifest() or {}
    stats = {
        "papers": papers,
        "chunks": chunks,
        "embedding_model": manifest.get("embedding_model") or components.embedder.name,
        "chunk_max_tokens": manifest.get("chunk_max_tokens"),
        "store": store.location,
        "collection": components.settings.collection,
    }
    if args.json:
        show_json(json.dumps(stats))
    else:
        for key, value in stats.items():
            show(f"{key}: {value}")
        resume = components.unfinished_ingest()
        if resume:
            show(f"last_ingest: did not finish (the index holds part of what it was given); run `{resume}` to "
                 "complete it")
    return 0
