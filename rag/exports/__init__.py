"""Taking results away: an answer with its references as Markdown, paper lists as CSV and BibTeX, and the
``FIELD OP VALUE`` filters (``year>=2024``) that choose which papers a list or a search keeps."""
