"""Credentials never travel in a config: mmengine logs the whole config, dumps it into the work
dir and stores it in every checkpoint, and the config hash hashes it. Remote stores take their
credentials from the environment or the file system library's own configuration (for S3:
``AWS_ACCESS_KEY_ID`` / ``AWS_SECRET_ACCESS_KEY`` / ``AWS_PROFILE``, ``~/.aws/credentials``; for
GCS: ``GOOGLE_APPLICATION_CREDENTIALS``); this module names secret-looking options so that they
are refused where a store opens and redacted wherever a config is written.
"""
import re
from typing import Any

REDACTED = '<redacted>'

#: Option names that hold a credential (case-insensitive, anywhere in the name).
SECRET_NAME = re.compile(
    r'secret|passw|token|credential|api_?key|access_?key|private_?key|account_?key|session|'
    r'signature|auth|sas_?key', re.IGNORECASE)
#: Names that are credentials only inside ``storage_options`` (a bare ``key``: an access key).
_STORAGE_SECRET_NAMES = ('key', 'username', 'user')


def is_secret(name: Any, in_storage_options: bool = False) -> bool:
    """Whether an option called ``name`` looks like it holds a credential."""
    name = str(name)
    return SECRET_NAME.search(name) is not None or (
        in_storage_options and name.lower() in _STORAGE_SECRET_NAMES)


def secret_paths(value: Any, path: str = '', in_storage_options: bool = False) -> list:
    """Dotted paths of the secret-looking entries of a nested config value."""
    found = []
    if isinstance(value, dict):
        for key, item in value.items():
            sub = f'{path}.{key}' if path else str(key)
            if is_secret(key, in_storage_options) and item not in (None, '', REDACTED):
                found.append(sub)
            else:
                found += secret_paths(item, sub,
                                      in_storage_options or key == 'storage_options')
    elif isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            found += secret_paths(item, f'{path}.{i}', in_storage_options)
    return found


def redact(value: Any, in_storage_options: bool = False) -> Any:
    """A copy of a nested config value with every secret-looking entry replaced by
    :data:`REDACTED` (empty values are kept: they hold nothing)."""
    if isinstance(value, dict):
        return {key: REDACTED if is_secret(key, in_storage_options)
                and item not in (None, '', REDACTED)
                else redact(item, in_storage_options or key == 'storage_options')
                for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(redact(item, in_storage_options) for item in value)
    return value
