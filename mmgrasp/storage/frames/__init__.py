"""The frame store (every frame's masked cloud) and the image store (every frame's whole RGB
and depth images), each built once per dataset root, camera and version."""
