"""Settings: read once from ``newsletter.toml``, overridden by ``NEWSLETTER_<SECTION>_<KEY>``.

The result is a frozen :class:`Settings` handed explicitly to every stage; nothing below the
command line reads ``os.environ`` for configuration. Relative paths (and feed paths) are taken
relative to the folder of the configuration file, so a job behaves the same whatever its
working directory. Secrets are never read from the file: they come from the environment only,
and a secret found in the file is refused rather than silently used.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any, get_type_hints

import pendulum

from .errors import ConfigError

#: Environment variables that look like overrides but are secrets read elsewhere.
SECRET_VARIABLES = frozenset(
    {"NEWSLETTER_SMTP_PASSWORD", "NEWSLETTER_TRANSLATE_API_KEY"}
)
#: Secrets someone might put in the file, and the variable each really comes from.
_SECRET_KEYS = {
    ("smtp", "password"): "NEWSLETTER_SMTP_PASSWORD",
    ("translate", "api_key"): "NEWSLETTER_TRANSLATE_API_KEY",
    ("github", "token"): "GITHUB_TOKEN",
    ("delivery", "secret"): "NEWSLETTER_SECRET",
}
_REPO = re.compile(r"^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$")


@dataclass(frozen=True)
class FeedSettings:
    #: Feed files or http(s) URLs merged into one issue.
    urls: tuple[str, ...] = ()
    #: ``owner/name`` of the repository whose PRs are reviewed; other repos are skipped.
    repo: str = "vllm-project/vllm"


@dataclass(frozen=True)
class IssueSettings:
    #: The timezone whose Monday 00:00 starts a week.
    timezone: str = "Asia/Shanghai"
    #: Each email's HTML stays within this many KB (1 KB = 1,000 bytes; never above 100).
    size_budget_kb: int = 90
    #: Whether publish and send refuse an issue the editor has not approved.
    require_approval: bool = False


@dataclass(frozen=True)
class PathSettings:
    build_dir: Path = Path("build")
    data_dir: Path = Path("data")
    editorial_dir: Path = Path("editorial")


@dataclass(frozen=True)
class SiteSettings:
    #: Where the web archive is served; the email's archive links start here.
    base_url: str = "http://127.0.0.1:8000"
    #: Where the subscription app is served (unsubscribe, preferences); "" when there is
    #: none (the archive then shows no subscribe form, and sending refuses).
    app_url: str = "http://127.0.0.1:8001"


@dataclass(frozen=True)
class DeliverySettings:
    transport: str = "outbox"
    from_: str = "vLLM PR Weekly <weekly@example.org>"
    reply_to: str = ""
    #: Messages per second; 0 means "as the transport allows" (SES: the account's rate).
    max_rate: float = 0.0
    concurrency: int = 4
    unsubscribe_mailto: str = ""
    #: Who sends the issue, for every footer ("Sent by …"); empty: the ``from`` address.
    publisher: str = ""
    #: The sender's postal address (CAN-SPAM), shown in every footer when set.
    postal_address: str = ""


@dataclass(frozen=True)
class SmtpSettings:
    host: str = "127.0.0.1"
    port: int = 587
    starttls: bool = True
    username: str = ""


@dataclass(frozen=True)
class SesSettings:
    configuration_set: str = ""
    #: The SNS topics SES publishes bounces and complaints to. ``POST /webhooks/ses``
    #: accepts messages from these topics only (any AWS account can sign a message for a
    #: topic of its own); empty turns the webhook off.
    sns_topic_arns: tuple[str, ...] = ()


@dataclass(frozen=True)
class StoreSettings:
    #: ``sqlite`` (a file under ``[paths] data_dir``: one machine) or ``dynamodb`` (the
    #: production store: no disk that lasts between runs, the app and the job side by side).
    backend: str = "sqlite"
    #: DynamoDB tables (``backend = "dynamodb"``): subscribers, with their address claims,
    #: suppressions, handled-message keys, rate counters and run locks; and the ledger.
    subscribers_table: str = "vllm-pr-weekly-subscribers"
    ledger_table: str = "vllm-pr-weekly-ledger"


@dataclass(frozen=True)
class SubscriptionSettings:
    #: Days a confirmation link works (DESIGN.md: 7).
    confirm_days: int = 7
    #: Transient bounces in a row that make an address ``bounced``.
    transient_bounce_limit: int = 3
    #: Confirmation mails one address can be sent per day (the rest are not sent; the
    #: page says the same thing either way).
    address_per_day: int = 3
    #: Sign-up requests one client address can make per hour (then 429).
    client_per_hour: int = 20
    #: Proxies (comma-separated IPs, or "*") whose X-Forwarded-For / X-Forwarded-Proto are
    #: believed: CloudFront or a load balancer in front of ``newsletter serve``.
    forwarded_allow_ips: str = "127.0.0.1"


@dataclass(frozen=True)
class InboxSettings:
    #: Where SES's receipt rule stores inbound mail: ``local`` (a folder) or ``s3``.
    source: str = "local"
    dir: Path = Path("data/inbox")
    bucket: str = ""
    prefix: str = "inbound/"


@dataclass(frozen=True)
class ArchiveSettings:
    target: str = "local"
    dir: Path = Path("build/site")
    bucket: str = ""
    prefix: str = ""


@dataclass(frozen=True)
class TranslateSettings:
    backend: str = "none"
    base_url: str = ""
    model: str = ""


@dataclass(frozen=True)
class GithubSettings:
    enabled: bool = False
    api_url: str = "https://api.github.com"


@dataclass(frozen=True)
class Settings:
    feed: FeedSettings = field(default_factory=FeedSettings)
    issue: IssueSettings = field(default_factory=IssueSettings)
    paths: PathSettings = field(default_factory=PathSettings)
    site: SiteSettings = field(default_factory=SiteSettings)
    delivery: DeliverySettings = field(default_factory=DeliverySettings)
    smtp: SmtpSettings = field(default_factory=SmtpSettings)
    ses: SesSettings = field(default_factory=SesSettings)
    store: StoreSettings = field(default_factory=StoreSettings)
    subscriptions: SubscriptionSettings = field(default_factory=SubscriptionSettings)
    inbox: InboxSettings = field(default_factory=InboxSettings)
    archive: ArchiveSettings = field(default_factory=ArchiveSettings)
    translate: TranslateSettings = field(default_factory=TranslateSettings)
    github: GithubSettings = field(default_factory=GithubSettings)
    #: The folder relative paths are resolved against (the config file's folder).
    base_dir: Path = Path(".")
    #: The file these settings came from, if any (for messages).
    source: Path | None = None

    def resolve(self, path: str | Path) -> Path:
        """A configured path made absolute against the configuration's folder."""
        p = Path(path).expanduser()
        return p if p.is_absolute() else (self.base_dir / p).resolve()

    def feed_location(self, url: str) -> str:
        """A feed URL as given, or a feed path made absolute."""
        return url if re.match(r"^[a-z][a-z0-9+.-]*://", url, re.I) else str(self.resolve(url))


_SECTIONS: dict[str, type] = {
    f.name: f.default_factory  # type: ignore[misc]
    for f in fields(Settings)
    if f.name not in ("base_dir", "source")
}


def _key_name(field_name: str) -> str:
    return field_name.rstrip("_")


def load(path: Path | None, environ: Mapping[str, str], *, cwd: Path | None = None) -> Settings:
    """Read, merge and validate the settings.

    ``path`` None means ``newsletter.toml`` in the working folder if there is one, else the
    built-in defaults (which mirror the embedded default deployment).
    """
    cwd = cwd or Path.cwd()
    raw: dict[str, Any] = {}
    source: Path | None = None
    if path is None and (cwd / "newsletter.toml").is_file():
        path = cwd / "newsletter.toml"
    if path is not None:
        source = path.resolve()
        try:
            raw = tomllib.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise ConfigError(f"no such file: {path}") from None
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(f"cannot read {path}: {exc}") from exc
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"{path} is not valid TOML: {exc}") from exc
    base_dir = source.parent if source else cwd.resolve()

    sections = {}
    for name, cls in _SECTIONS.items():
        given = raw.pop(name, {})
        if not isinstance(given, dict):
            raise ConfigError("must be a table", key=f"[{name}]")
        sections[name] = _build_section(name, cls, given, environ)
    if raw:
        unknown = ", ".join(sorted(raw))
        raise ConfigError(f"unknown section(s) {unknown}; known: {', '.join(_SECTIONS)}")
    _check_environment(environ)
    settings = Settings(**sections, base_dir=base_dir, source=source)
    _validate(settings)
    return settings


def _build_section(name: str, cls: type, given: dict[str, Any], environ: Mapping[str, str]):
    hints = get_type_hints(cls)
    by_key = {_key_name(f.name): f.name for f in fields(cls)}
    values: dict[str, Any] = {}
    for key, value in given.items():
        if (name, key) in _SECRET_KEYS:
            env = _SECRET_KEYS[(name, key)]
            raise ConfigError(f"secrets are read from the environment only ({env})",
                              key=f"[{name}] {key}")
        if key not in by_key:
            raise ConfigError(f"unknown key; known: {', '.join(by_key)}", key=f"[{name}] {key}")
        attr = by_key[key]
        values[attr] = _coerce(value, hints[attr], f"[{name}] {key}")
    for key, attr in by_key.items():
        env = f"NEWSLETTER_{name.upper()}_{key.upper()}"
        if env in environ:
            values[attr] = _coerce(environ[env], hints[attr], env, from_env=True)
    return cls(**values)


def _check_environment(environ: Mapping[str, str]) -> None:
    """Refuse a misspelt override rather than silently ignoring it."""
    known = {
        f"NEWSLETTER_{section.upper()}_{_key_name(f.name).upper()}"
        for section, cls in _SECTIONS.items()
        for f in fields(cls)
    }
    prefixes = tuple(f"NEWSLETTER_{section.upper()}_" for section in _SECTIONS)
    for env in environ:
        if env.startswith(prefixes) and env not in known and env not in SECRET_VARIABLES:
            raise ConfigError("unknown override (misspelt?)", key=env)


_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


def _coerce(value: Any, hint: Any, key: str, *, from_env: bool = False) -> Any:
    hint_text = str(hint)
    try:
        if hint is bool:
            if isinstance(value, bool):
                return value
            if from_env and str(value).strip().lower() in _TRUE | _FALSE:
                return str(value).strip().lower() in _TRUE
            raise TypeError("expected true or false")
        if hint is int:
            if isinstance(value, bool):
                raise TypeError("expected a whole number")
            if isinstance(value, int) or from_env:
                return int(value)
            raise TypeError("expected a whole number")
        if hint is float:
            if isinstance(value, bool):
                raise TypeError("expected a number")
            if isinstance(value, int | float) or from_env:
                return float(value)
            raise TypeError("expected a number")
        if hint is Path:
            if not isinstance(value, str) or not value:
                raise TypeError("expected a path")
            return Path(value)
        if hint_text.startswith("tuple"):
            if from_env:
                return tuple(v.strip() for v in str(value).split(",") if v.strip())
            if isinstance(value, str):
                return (value,)
            if isinstance(value, list) and all(isinstance(v, str) for v in value):
                return tuple(value)
            raise TypeError("expected a list of strings")
        if hint is str:
            if isinstance(value, str):
                return value
            raise TypeError("expected a string")
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"{exc} (got {value!r})", key=key) from None
    raise ConfigError(f"unsupported setting type {hint_text}", key=key)  # pragma: no cover


def _validate(s: Settings) -> None:
    try:
        pendulum.timezone(s.issue.timezone)
    except Exception:  # pendulum raises several types for an unknown zone name
        raise ConfigError(f"unknown timezone {s.issue.timezone!r}",
                          key="[issue] timezone") from None
    if not 1 <= s.issue.size_budget_kb <= 100:
        raise ConfigError("must be between 1 and 100 (Gmail clips messages near 102 KB)",
                          key="[issue] size_budget_kb")
    if not _REPO.match(s.feed.repo):
        raise ConfigError(f"expected owner/name, got {s.feed.repo!r}", key="[feed] repo")
    for key, url in (("[site] base_url", s.site.base_url), ("[site] app_url", s.site.app_url)):
        if key == "[site] app_url" and url == "":
            continue  # no subscription app: the archive shows no form, sending refuses
        if not re.match(r"^https?://[^\s/]+", url):
            raise ConfigError(f"expected an http(s) URL, got {url!r}", key=key)
    choices = {
        "[delivery] transport": (s.delivery.transport, ("outbox", "smtp", "ses")),
        "[archive] target": (s.archive.target, ("local", "s3")),
        "[translate] backend": (s.translate.backend, ("none", "openai", "aws")),
        "[inbox] source": (s.inbox.source, ("local", "s3")),
        "[store] backend": (s.store.backend, ("sqlite", "dynamodb")),
    }
    for key, (value, allowed) in choices.items():
        if value not in allowed:
            raise ConfigError(f"expected one of {', '.join(allowed)}, got {value!r}", key=key)
    if s.delivery.max_rate < 0:
        raise ConfigError("must not be negative", key="[delivery] max_rate")
    if s.delivery.concurrency < 1:
        raise ConfigError("must be at least 1", key="[delivery] concurrency")
    for key in ("confirm_days", "transient_bounce_limit", "address_per_day", "client_per_hour"):
        if getattr(s.subscriptions, key) < 1:
            raise ConfigError("must be at least 1", key=f"[subscriptions] {key}")
    for arn in s.ses.sns_topic_arns:
        if not re.match(r"^arn:aws[a-z-]*:sns:[a-z0-9-]+:\d{12}:[A-Za-z0-9_.-]{1,256}$", arn):
            raise ConfigError(f"expected an SNS topic ARN, got {arn!r}",
                              key="[ses] sns_topic_arns")
    for key in ("subscribers_table", "ledger_table"):
        if not re.match(r"^[A-Za-z0-9_.-]{3,255}$", getattr(s.store, key)):
            raise ConfigError("expected a DynamoDB table name (3-255 of A-Z a-z 0-9 _ . -)",
                              key=f"[store] {key}")
    if s.inbox.source == "s3" and not s.inbox.bucket:
        raise ConfigError("needed when [inbox] source is s3", key="[inbox] bucket")


def with_feeds(settings: Settings, urls: tuple[str, ...]) -> Settings:
    """The same settings reading other feeds (``--feed``)."""
    return replace(settings, feed=replace(settings.feed, urls=urls))
