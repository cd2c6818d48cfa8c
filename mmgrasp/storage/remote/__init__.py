"""Label stores published at a URL: the obstore source that reads a file's ranges
(:mod:`.sources`), the on-disk block cache (:mod:`.block_cache`), publishing and planned range
reads (:mod:`.store`)."""
