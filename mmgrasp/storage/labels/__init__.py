"""The label store: built once per dataset and version, its per-view summaries (:mod:`.summaries`)
and the memory maps its files are read through (:mod:`.maps`)."""
