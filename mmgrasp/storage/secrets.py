"""Credentials never travel in a config: mmengine logs the whole config, dumps it into the work
dir and stores it in every checkpoint, and the config hash hashes it. Remote stores take their
credentials from the environment or the object store library's own configuration (for S3:
``AWS_ACCESS_KEY_ID`` / ``AWS_SECRET_ACCESS_KEY`` / ``AWS_PROFILE``, ``~/.aws/credentials``; for
GCS: ``GOOGLE_APPLICATION_CREDENTIALS``; for Azure: ``AZURE_STORAGE_*``).

``storage_options`` are obstore's configuration keys, so they are judged by name against
:data:`STORE_KEYS`: every key obstore 0.12 names for S3, GCS and Azure (its ``S3Config`` /
``GCSConfig`` / ``AzureConfig``, with the aliases obstore accepts; HTTP takes none), each marked
secret or not. A secret one is refused where a store opens and redacted wherever a config is
written; so is a name the table does not hold (it cannot be told safe, and obstore would refuse
it). Elsewhere in a config, a name that is one of those secrets or holds a credential-like
fragment (:data:`SECRET_NAME`) counts as a secret.
"""
import re
from typing import Any, Dict

REDACTED = '<redacted>'

#: obstore's configuration keys by scheme: name (as obstore accepts it, case-insensitive) ->
#: whether its value is a credential. Paths to credential files, identifiers (key ids of KMS,
#: client/tenant ids, role ARNs) and endpoints are not: they grant nothing without the secret.
STORE_KEYS: Dict[str, Dict[str, bool]] = {
    's3': {
        **dict.fromkeys(['access_key_id', 'aws_access_key_id', 'secret_access_key',
                         'aws_secret_access_key', 'session_token', 'aws_session_token', 'token',
                         'aws_token', 'sse_customer_key_base64',
                         'aws_sse_customer_key_base64'], True),
        **dict.fromkeys([
            'bucket', 'aws_bucket', 'bucket_name', 'aws_bucket_name', 'checksum_algorithm',
            'aws_checksum_algorithm', 'conditional_put', 'aws_conditional_put',
            'container_credentials_relative_uri', 'aws_container_credentials_relative_uri',
            'container_credentials_full_uri', 'aws_container_credentials_full_uri',
            'container_authorization_token_file', 'aws_container_authorization_token_file',
            'copy_if_not_exists', 'aws_copy_if_not_exists', 'default_region',
            'aws_default_region', 'disable_tagging', 'aws_disable_tagging', 'disable_bulk_delete',
            'aws_disable_bulk_delete', 'endpoint', 'aws_endpoint', 'endpoint_url',
            'aws_endpoint_url', 'aws_endpoint_url_s3', 'endpoint_url_sts', 'aws_endpoint_url_sts',
            'sts_endpoint', 'imdsv1_fallback', 'aws_imdsv1_fallback',
            'metadata_endpoint', 'aws_metadata_endpoint', 'region', 'aws_region', 'request_payer',
            'aws_request_payer', 'role_arn', 'aws_role_arn', 'role_session_name',
            'aws_role_session_name', 's3_express', 'aws_s3_express', 'server_side_encryption',
            'aws_server_side_encryption', 'skip_signature', 'aws_skip_signature',
            'sse_bucket_key_enabled', 'aws_sse_bucket_key_enabled', 'sse_kms_key_id',
            'aws_sse_kms_key_id', 'unsigned_payload', 'aws_unsigned_payload',
            'virtual_hosted_style_request', 'aws_virtual_hosted_style_request',
            'web_identity_token_file', 'aws_web_identity_token_file'], False),
    },
    'gs': {
        **dict.fromkeys(['service_account_key', 'google_service_account_key', 'bearer_token',
                         'google_bearer_token'], True),
        **dict.fromkeys([
            'service_account', 'google_service_account', 'service_account_path',
            'google_service_account_path', 'application_credentials',
            'google_application_credentials', 'base_url', 'google_base_url', 'bucket',
            'google_bucket', 'bucket_name', 'google_bucket_name', 'skip_signature',
            'google_skip_signature'], False),
    },
    'az': {
        **dict.fromkeys([
            'account_key', 'azure_storage_account_key', 'access_key', 'azure_storage_access_key',
            'master_key', 'azure_storage_master_key', 'client_secret', 'azure_client_secret',
            'azure_storage_client_secret', 'sas_key', 'azure_storage_sas_key', 'sas_token',
            'azure_storage_sas_token', 'token', 'azure_storage_token', 'bearer_token',
            'encryption_key', 'azure_storage_encryption_key', 'fabric_session_token',
            'azure_fabric_session_token'], True),
        **dict.fromkeys([
            'account_name', 'azure_storage_account_name', 'client_id', 'azure_client_id',
            'azure_storage_client_id', 'credential_type', 'azure_credential_type', 'tenant_id',
            'azure_tenant_id', 'azure_storage_tenant_id', 'authority_id', 'azure_authority_id',
            'azure_storage_authority_id', 'authority_host', 'azure_authority_host',
            'azure_storage_authority_host', 'use_emulator', 'azure_storage_use_emulator',
            'use_fabric_endpoint', 'azure_use_fabric_endpoint', 'endpoint', 'azure_endpoint',
            'azure_storage_endpoint', 'msi_endpoint', 'azure_msi_endpoint', 'identity_endpoint',
            'azure_identity_endpoint', 'object_id', 'azure_object_id', 'msi_resource_id',
            'azure_msi_resource_id', 'federated_token_file', 'azure_federated_token_file',
            'use_azure_cli', 'azure_use_azure_cli', 'skip_signature', 'azure_skip_signature',
            'container_name', 'azure_container_name', 'disable_tagging', 'azure_disable_tagging',
            'fabric_token_service_url', 'azure_fabric_token_service_url', 'fabric_workload_host',
            'azure_fabric_workload_host', 'fabric_cluster_identifier',
            'azure_fabric_cluster_identifier'], False),
    },
    'http': {},  # obstore's HTTPStore takes no configuration
    'file': {},  # nor does its LocalStore: a file:// URL is a local path
}
#: URL schemes -> the key table obstore uses for them.
SCHEME_KEYS = {'s3': 's3', 's3a': 's3', 'gs': 'gs', 'az': 'az', 'adl': 'az', 'azure': 'az',
               'abfs': 'az', 'abfss': 'az', 'http': 'http', 'https': 'http', 'file': 'file'}
_SECRET_KEYS = frozenset(k for keys in STORE_KEYS.values() for k, secret in keys.items()
                         if secret)
_KNOWN_KEYS = frozenset(k for keys in STORE_KEYS.values() for k in keys)

#: Names outside ``storage_options`` that hold a credential (case-insensitive, anywhere).
SECRET_NAME = re.compile(
    r'secret|passw|token|credential|api_?key|access_?key|private_?key|account_?key|'
    r'auth|sas_?key', re.IGNORECASE)


def is_secret(name: Any, in_storage_options: bool = False) -> bool:
    """Whether an option called ``name`` may hold a credential: inside ``storage_options`` a
    secret key of :data:`STORE_KEYS` or a name it does not hold; elsewhere one of those secret
    keys or a name matching :data:`SECRET_NAME`."""
    name = str(name).lower()
    if in_storage_options:
        return name in _SECRET_KEYS or name not in _KNOWN_KEYS
    return name in _SECRET_KEYS or SECRET_NAME.search(name) is not None


def unknown_store_keys(scheme: str, options: dict) -> list:
    """The names in ``options`` that are no obstore configuration key of ``scheme``."""
    keys = STORE_KEYS.get(SCHEME_KEYS.get(scheme.lower(), ''), None)
    if keys is None:
        return []  # schemes obstore configures otherwise: obstore itself decides
    return sorted(str(k) for k in options if str(k).lower() not in keys)


def secret_paths(value: Any, path: str = '', in_storage_options: bool = False) -> list:
    """Dotted paths of the secret-looking entries of a nested config value."""
    found = []
    if isinstance(value, dict):
        for key, item in value.items():
            sub = f'{path}.{key}' if path else str(key)
            if is_secret(key, in_storage_options) and item not in (None, '', REDACTED):
                found.append(sub)
            elif not in_storage_options:
                found += secret_paths(item, sub, key == 'storage_options')
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
                else redact(item, key == 'storage_options') if not in_storage_options else item
                for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(redact(item, in_storage_options) for item in value)
    return value
