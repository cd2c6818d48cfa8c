"""Registration helpers for tools and tests that build modules without a Runner."""
from mmengine.registry import init_default_scope as _init_default_scope


def register_all_modules(init_default_scope: bool = True) -> None:
    """Import every mmgrasp module that registers something, and make ``mmgrasp`` the default
    scope so that bare type names in configs resolve to mmgrasp's registries first."""
    import mmgrasp.datasets  # noqa: F401
    import mmgrasp.datasets.transforms  # noqa: F401
    import mmgrasp.engine  # noqa: F401
    import mmgrasp.evaluation  # noqa: F401
    import mmgrasp.models  # noqa: F401
    import mmgrasp.structures  # noqa: F401
    if init_default_scope:
        _init_default_scope('mmgrasp')
