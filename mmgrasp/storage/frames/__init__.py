"""The frame store: every frame's cloud, built once per dataset and version."""
