"""Label stores published at a URL: the sources that read a file's bytes (:mod:`.sources`),
the on-disk block cache (:mod:`.block_cache`), publishing and planned range reads (:mod:`.store`)."""
