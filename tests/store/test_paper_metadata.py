"""Papers' metadata kept in the index: what the records gave comes back from the store as it went in."""

from __future__ import annotations

from store.chroma import ChromaStore
from store.paper_records import paper_from_record, paper_to_metadata, record_metadata, unpack
from tests.metadata_corpus import metadata_papers


def test_metadata_survives_the_store(tmp_path):
    from rag.ingest import Ingestor, make_chunker
    from tests.conftest import FakeEmbedder

    papers = metadata_papers()
    embedder = FakeEmbedder()
    store = ChromaStore(path=tmp_path / "chroma", collection="my-papers")
    Ingestor(store, embedder, make_chunker(embedder, 256, 1)).ingest(papers)
    stored = store.get_papers([p.paper_id for p in papers])
    for paper in papers:
        back = stored[paper.paper_id]
        assert (back.authors, back.year, back.venue, back.urls) == (paper.authors, paper.year, paper.venue,
                                                                   paper.urls)
        assert back.content_hash == paper.content_hash  # so a re-ingest finds nothing changed


def test_record_round_trip_keeps_a_missing_year_missing():
    paper = metadata_papers()[0]
    plain = paper.__class__(paper.paper_id, paper.title, paper.abstract, paper.source, paper.ordinal)
    assert paper_from_record(plain.abstract, paper_to_metadata(plain)) == plain
    assert paper_from_record(paper.abstract, paper_to_metadata(paper)) == paper


def test_records_round_trip_in_every_format():
    for paper in metadata_papers():
        plain = paper.__class__(paper.paper_id, paper.title, paper.abstract, paper.source, paper.ordinal)
        for p in (paper, plain):
            assert paper_from_record(None, unpack(record_metadata(p, []))) == p
            assert paper_from_record(p.abstract, unpack(paper_to_metadata(p))) == p  # the older formats' keys
