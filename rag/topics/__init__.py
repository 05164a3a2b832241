"""The corpus as a whole: topics (clusters of the paper vectors, labelled by their distinctive words), the
nearest papers of a paper, and a 2-D map of the papers.

Like the BM25 index and the vector table it is derived data, saved beside them per store generation
(``topics.index``) and rebuilt when the index changes; the same index gives the same topics.
"""
