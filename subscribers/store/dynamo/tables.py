"""The DynamoDB store's tables, exactly as ``deploy/template.yaml`` and ``store migrate
--create-tables`` create them, and how a botocore error about them is worded for the operator.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    NoCredentialsError,
    PartialCredentialsError,
    WaiterError,
)
from botocore.exceptions import ConnectionError as NeverConnected

from subscribers.errors import StoreError

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

#: The subscribers table's sparse index: only subscriber items carry ``status``.
STATUS_INDEX = "by_status"
#: The ledger's index from SES's message id back to (issue, subscriber).
MESSAGE_INDEX = "by_message_id"
#: DynamoDB's TTL attribute (epoch seconds) on handled-message keys and rate counters.
TTL_ATTRIBUTE = "expires_at"

_DENIED = frozenset({"AccessDeniedException", "UnrecognizedClientException",
                     "InvalidSignatureException", "ExpiredTokenException",
                     "MissingAuthenticationTokenException", "IncompleteSignature"})
_THROTTLED = frozenset({"ProvisionedThroughputExceededException", "ThrottlingException",
                        "RequestLimitExceeded", "LimitExceededException"})


def table_definitions(subscribers_table: str, ledger_table: str) -> list[dict[str, Any]]:
    """The CreateTable arguments of both tables: exactly what the deploy template creates."""
    return [
        {
            "TableName": subscribers_table,
            "BillingMode": "PAY_PER_REQUEST",
            "AttributeDefinitions": [
                {"AttributeName": "pk", "AttributeType": "S"},
                {"AttributeName": "status", "AttributeType": "S"},
                {"AttributeName": "id", "AttributeType": "S"},
            ],
            "KeySchema": [{"AttributeName": "pk", "KeyType": "HASH"}],
            "GlobalSecondaryIndexes": [{
                "IndexName": STATUS_INDEX,
                "KeySchema": [{"AttributeName": "status", "KeyType": "HASH"},
                              {"AttributeName": "id", "KeyType": "RANGE"}],
                "Projection": {"ProjectionType": "ALL"},
            }],
        },
        {
            "TableName": ledger_table,
            "BillingMode": "PAY_PER_REQUEST",
            "AttributeDefinitions": [
                {"AttributeName": "issue_id", "AttributeType": "S"},
                {"AttributeName": "subscriber_id", "AttributeType": "S"},
                {"AttributeName": "message_id", "AttributeType": "S"},
            ],
            "KeySchema": [{"AttributeName": "issue_id", "KeyType": "HASH"},
                          {"AttributeName": "subscriber_id", "KeyType": "RANGE"}],
            "GlobalSecondaryIndexes": [{
                "IndexName": MESSAGE_INDEX,
                "KeySchema": [{"AttributeName": "message_id", "KeyType": "HASH"}],
                "Projection": {"ProjectionType": "KEYS_ONLY"},
            }],
        },
    ]


def create_tables(client: DynamoDBClient, subscribers_table: str, ledger_table: str, *,
                  delay: float = 2, max_attempts: int = 150) -> list[str]:
    """Create the two tables unless they exist, wait until ACTIVE, and turn TTL on; the names
    of the tables created."""
    created = []
    for definition in table_definitions(subscribers_table, ledger_table):
        table = definition["TableName"]
        try:
            client.create_table(**definition)
            created.append(table)
        except ClientError as exc:
            if error_code(exc) != "ResourceInUseException":  # in use: it exists
                raise table_error(client, exc, table) from exc
        except BotoCoreError as exc:
            raise table_error(client, exc, table) from exc
    for table in (subscribers_table, ledger_table):
        try:
            client.get_waiter("table_exists").wait(
                # botocore's waiter sleeps any number of seconds; the stubs say int.
                TableName=table, WaiterConfig=cast(Any, {"Delay": delay,
                                                         "MaxAttempts": max_attempts}))
        except WaiterError as exc:
            raise StoreError(f"dynamodb:{table}", f"the table did not become ACTIVE: "
                             f"{' '.join(str(exc).split())}") from exc
        except (ClientError, BotoCoreError) as exc:
            raise table_error(client, exc, table) from exc
    try:
        ttl = client.describe_time_to_live(TableName=subscribers_table)
        state = ttl.get("TimeToLiveDescription", {})
        if state.get("TimeToLiveStatus") not in ("ENABLED", "ENABLING"):
            client.update_time_to_live(
                TableName=subscribers_table,
                TimeToLiveSpecification={"Enabled": True, "AttributeName": TTL_ATTRIBUTE})
    except (ClientError, BotoCoreError) as exc:
        raise table_error(client, exc, subscribers_table) from exc
    return created


def table_error(client: DynamoDBClient, exc: Exception, table: str) -> StoreError:
    return StoreError(f"dynamodb:{table}", _reason(exc, table, client.meta.region_name))


def _reason(exc: Exception, table: str, region: str | None) -> str:
    """A botocore error in one line that says what to do."""
    if isinstance(exc, ClientError):
        code = error_code(exc)
        text = _one_line(exc.response.get("Error", {}).get("Message", ""))
        status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode") or 0
        if code == "ResourceNotFoundException":
            where = f" in {region}" if region else ""
            return (f"table {table} does not exist{where} (check [store] and the AWS region; "
                    "the deploy template creates the tables)")
        if code in _DENIED or status == 403:
            said = f"{code}: {text}" if text else code or "403"
            return (f"access denied to table {table} ({said}); check the credentials' "
                    "DynamoDB rights on it")
        if code in _THROTTLED:
            return f"DynamoDB throttled requests to table {table} ({code}); try again later"
        return f"DynamoDB {code or status}: {text}" if text else f"DynamoDB {code or status}"
    # Worded as every AWS adapter words them (pipeline.aws.access_problem, which this
    # package may not import).
    if isinstance(exc, NoCredentialsError | PartialCredentialsError):
        return (f"no usable AWS credentials ({exc}); set AWS_ACCESS_KEY_ID/"
                "AWS_SECRET_ACCESS_KEY or a profile")
    if isinstance(exc, NeverConnected):
        return f"cannot reach DynamoDB ({_one_line(exc)})"
    return f"DynamoDB: {_one_line(exc) or type(exc).__name__}"


def error_code(exc: ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code", ""))


def _one_line(text: object) -> str:
    """A message kept to one readable line (a proxy's HTML error page is not)."""
    said = " ".join(str(text).split())
    return said if len(said) <= 300 else said[:299] + "…"
