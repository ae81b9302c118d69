"""Settings: read once from ``newsletter.toml``, overridden by ``NEWSLETTER_<SECTION>_<KEY>``.

The result is a frozen :class:`Settings` handed explicitly to every stage. Relative paths are
taken from the configuration file's folder, so a job behaves the same whatever its working
directory. Secrets come from the environment only: one found in the file is refused.
"""

from __future__ import annotations

import math
import re
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, get_type_hints
from urllib.parse import urlsplit

import pendulum
from email_validator import EmailNotValidError, validate_email

from pipeline.errors import ConfigError
from pipeline.week import iso_monday

#: Environment variables that look like overrides but are secrets read elsewhere.
SECRET_VARIABLES = frozenset({"NEWSLETTER_SMTP_PASSWORD", "NEWSLETTER_TRANSLATE_API_KEY"})
#: Secrets someone might put in the file, and the variable each really comes from.
_SECRET_KEYS = {
    ("smtp", "password"): "NEWSLETTER_SMTP_PASSWORD",
    ("translate", "api_key"): "NEWSLETTER_TRANSLATE_API_KEY",
    ("github", "token"): "GITHUB_TOKEN",
    ("delivery", "secret"): "NEWSLETTER_SECRET",
}
_REPO = re.compile(r"^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$")
#: The secrets that sign links (``NEWSLETTER_SECRET_PREVIOUS``: comma-separated).
SIGNING_SECRETS = ("NEWSLETTER_SECRET", "NEWSLETTER_SECRET_PREVIOUS")
#: A signing secret shorter than this is refused: HMAC-SHA256 keys want 256 bits, and a
#: short one could be guessed offline from any single link.
MIN_SECRET_BYTES = 32
#: A host name as it may appear in a URL of ours: ASCII labels (IDNA-encode the others),
#: or an IPv6 literal.
_HOST = re.compile(r"^(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.)*"
                   r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?\Z|^\[[0-9A-Fa-f:.]+\]\Z")
#: Sane ranges of numbers: a value beyond them is a typo, not a policy.
_RANGES: dict[str, tuple[int, int, str]] = {
    "[subscriptions] confirm_days": (1, 30, "days a confirmation link works"),
    "[subscriptions] transient_bounce_limit": (1, 20, "transient bounces in a row"),
    "[subscriptions] address_per_day": (1, 100, "confirmation mails per address per day"),
    "[subscriptions] client_per_hour": (1, 10_000, "sign-ups per client per hour"),
    "[delivery] concurrency": (1, 256, "messages in flight at once"),
    "[delivery] retry_seconds": (0, 86_400, "seconds of retries after the first pass"),
    "[smtp] port": (1, 65_535, "a TCP port"),
    "[smtp] max_connections": (0, 256, "connections at once; 0: one per sending thread"),
}
#: Messages per second no transport of ours reaches: above it, a typo.
MAX_RATE = 10_000.0


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
    #: The ISO week of issue No. 1 (``2026-W48``); every issue's number counts weeks from
    #: it. "": from the first week the archive holds (the week being built when it holds
    #: none), so a fresh archive's first issue is No. 1.
    first_week: str = ""
    #: A TOML file of verdict phrases added to the shipped ``templates/verdicts.toml`` (its
    #: lists extend those; docs/ranking.md); "" for the shipped ones alone.
    verdicts: str = ""


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
    #: Seconds the end of a run keeps retrying the messages a relay refused for now; what is
    #: still refused then exits 4, for the next run. 0: no rounds after the first pass.
    retry_seconds: float = 600.0
    #: Send a part as 8bit data where that is the smallest: a mostly-Chinese part weighs its
    #: own size instead of 1.37 times it in base64. An SMTP relay must announce 8BITMIME.
    #: The build fits the budget to it: change it, then build again.
    eight_bit: bool = True


@dataclass(frozen=True)
class SmtpSettings:
    host: str = "127.0.0.1"
    port: int = 587
    #: The older switch for :attr:`tls`: true is ``starttls``, false ``none``.
    starttls: bool = True
    username: str = ""
    #: ``starttls`` (port 587: plain, then upgraded), ``implicit`` (port 465: TLS from the
    #: first byte) or ``none`` (a relay on a trusted network); "" follows ``starttls``.
    tls: str = ""
    #: A PEM file of the CA(s) to trust for the relay's certificate (a private CA); ""
    #: trusts the system's store.
    ca_file: str = ""
    #: The name given in EHLO; "" is the domain of ``[delivery] from``.
    helo_name: str = ""
    #: The envelope sender (``MAIL FROM``), where bounces go (point it at the address
    #: ``inbox process`` reads); "" is the ``[delivery] from`` address.
    return_path: str = ""
    #: Connections open at once to the relay, at most; 0: one per sending thread. Set it to
    #: the relay's own limit per client when that is lower.
    max_connections: int = 0

    @property
    def tls_mode(self) -> str:
        """:attr:`tls` when set, else what the older ``starttls`` switch says."""
        return self.tls or ("starttls" if self.starttls else "none")


#: What ``[smtp] tls`` may say ("" follows ``[smtp] starttls``).
TLS_MODES = ("", "starttls", "implicit", "none")
#: The port of SMTP over TLS from the first byte (RFC 8314 "submissions").
IMPLICIT_TLS_PORT = 465


@dataclass(frozen=True)
class SesSettings:
    configuration_set: str = ""
    #: The only SNS topics ``POST /webhooks/ses`` accepts (any AWS account can sign a message
    #: for a topic of its own); empty turns the webhook off.
    sns_topic_arns: tuple[str, ...] = ()


@dataclass(frozen=True)
class StoreSettings:
    #: ``sqlite`` (a file under ``[paths] data_dir``: one machine) or ``dynamodb``.
    backend: str = "sqlite"
    #: The DynamoDB tables (``backend = "dynamodb"``).
    subscribers_table: str = "vllm-pr-weekly-subscribers"
    ledger_table: str = "vllm-pr-weekly-ledger"


@dataclass(frozen=True)
class SubscriptionSettings:
    #: Days a confirmation link works (7 by default).
    confirm_days: int = 7
    #: Transient bounces in a row that make an address ``bounced``.
    transient_bounce_limit: int = 3
    #: Confirmation mails one address can be sent per day.
    address_per_day: int = 3
    #: Sign-up requests one client address can make per hour (then 429).
    client_per_hour: int = 20
    #: Proxies (comma-separated IPs, or "*") whose X-Forwarded-For / X-Forwarded-Proto are
    #: believed: CloudFront or a load balancer in front of ``newsletter serve``.
    forwarded_allow_ips: str = "127.0.0.1"
    #: An SQS queue the sign-ups go to, drained by deploy/'s Lambda function, so the answer
    #: never waits for the address's state; empty: done in this process.
    queue_url: str = ""


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
        p = Path(path).expanduser()
        return p if p.is_absolute() else (self.base_dir / p).resolve()

    def feed_location(self, url: str) -> str:
        """A feed URL as given, or a feed path made absolute."""
        return url if re.match(r"^[a-z][a-z0-9+.-]*://", url, re.I) else str(self.resolve(url))


#: Each section's name and its dataclass (the type of the section's default).
_SECTIONS: dict[str, type] = {
    f.name: type(getattr(Settings(), f.name))
    for f in fields(Settings)
    if f.name not in ("base_dir", "source")
}


def _key_name(field_name: str) -> str:
    return field_name.rstrip("_")


def _override(section: str, key: str) -> str:
    return f"NEWSLETTER_{section.upper()}_{key.upper()}"


#: Every override's variable, and the key it overrides.
_OVERRIDES = {_override(section, _key_name(f.name)): f"[{section}] {_key_name(f.name)}"
              for section, cls in _SECTIONS.items() for f in fields(cls)}


def load(path: Path | None, environ: Mapping[str, str], *, cwd: Path | None = None) -> Settings:
    """Read, merge and validate the settings: ``path`` None is ``newsletter.toml`` in the
    working folder if there is one, else the built-in defaults."""
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
    overridden = {key: env for env, key in _OVERRIDES.items() if env in environ}
    try:
        _validate(settings)
    except _Invalid as invalid:  # named as the operator set it: the file's key or the variable
        key = invalid.key
        if key in overridden:
            key = f"{overridden[key]} ({key})"
        raise ConfigError(invalid.message, key=key) from None
    return settings


class _Invalid(Exception):
    """A merged setting that is wrong; :func:`load` names where it came from."""

    def __init__(self, message: str, *, key: str) -> None:
        super().__init__(message)
        self.message = message
        self.key = key


def _build_section(name: str, cls: type, given: dict[str, Any], environ: Mapping[str, str]
                   ) -> Any:
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
        if (env := _override(name, key)) in environ:
            values[attr] = _coerce(environ[env], hints[attr], env, from_env=True)
    return cls(**values)


def _check_environment(environ: Mapping[str, str]) -> None:
    """Refuse a misspelt override rather than ignore it, and a signing secret too short to
    be one (here, so every command says so, not only the send that would sign with it)."""
    for name in SIGNING_SECRETS:
        value = environ.get(name, "")
        secrets = value.split(",") if name == "NEWSLETTER_SECRET_PREVIOUS" else [value]
        if any(0 < len(secret.strip().encode("utf-8")) < MIN_SECRET_BYTES for secret in secrets):
            raise ConfigError(f"too short: use at least {MIN_SECRET_BYTES} random bytes "
                              "(e.g. python -c \"import secrets; "
                              "print(secrets.token_urlsafe(32))\")", key=name)
    prefixes = tuple(_override(section, "") for section in _SECTIONS)
    for env in environ:
        if env.startswith(prefixes) and env not in _OVERRIDES and env not in SECRET_VARIABLES:
            raise ConfigError("unknown override (misspelt?)", key=env)


_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


def _coerce(value: Any, hint: Any, key: str, *, from_env: bool = False) -> Any:
    """``value`` (from the file, or an environment variable's text) as the declared type."""
    convert = _as_tuple if str(hint).startswith("tuple") else _CONVERTERS[hint]
    try:
        return convert(value, from_env)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"{exc} (got {value!r})", key=key) from None


def _as_bool(value: Any, from_env: bool) -> bool:
    if isinstance(value, bool):
        return value
    if from_env and str(value).strip().lower() in _TRUE | _FALSE:
        return str(value).strip().lower() in _TRUE
    raise TypeError("expected true or false")


def _as_int(value: Any, from_env: bool) -> int:
    # A TOML true is an int to Python, not a number to a reader.
    if isinstance(value, bool) or not (isinstance(value, int) or from_env):
        raise TypeError("expected a whole number")
    return int(value)


def _as_float(value: Any, from_env: bool) -> float:
    if isinstance(value, bool) or not (isinstance(value, int | float) or from_env):
        raise TypeError("expected a number")
    return float(value)


def _as_path(value: Any, from_env: bool) -> Path:
    if not isinstance(value, str) or not value:
        raise TypeError("expected a path")
    return Path(value)


def _as_str(value: Any, from_env: bool) -> str:
    if isinstance(value, str):
        return value
    raise TypeError("expected a string")


def _as_tuple(value: Any, from_env: bool) -> tuple[str, ...]:
    """One string is a list of one; an environment variable is a comma-separated list."""
    if from_env:
        return tuple(v.strip() for v in str(value).split(",") if v.strip())
    if isinstance(value, str):
        return (value,)
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return tuple(value)
    raise TypeError("expected a list of strings")


#: How a value becomes each type a setting may declare (tuples: :func:`_as_tuple`).
_CONVERTERS: dict[Any, Callable[[Any, bool], Any]] = {
    bool: _as_bool, int: _as_int, float: _as_float, Path: _as_path, str: _as_str,
}


def _validate(s: Settings) -> None:
    """Every rule a setting's type cannot say; the first broken one is reported."""
    for check in (_check_issue, _check_urls, _check_choices, _check_numbers, _check_names,
                  _check_smtp):
        check(s)


def _check_issue(s: Settings) -> None:
    try:
        pendulum.timezone(s.issue.timezone)
    except Exception:  # pendulum raises several types for an unknown zone name
        raise _Invalid(f"unknown timezone {s.issue.timezone!r}", key="[issue] timezone") from None
    if not 1 <= s.issue.size_budget_kb <= 100:
        raise _Invalid("must be between 1 and 100 (Gmail clips messages near 102 KB)",
                       key="[issue] size_budget_kb")
    if s.issue.first_week:
        try:
            iso_monday(s.issue.first_week)
        except ValueError as exc:
            raise _Invalid(f"{exc}, got {s.issue.first_week!r}",
                           key="[issue] first_week") from None
    if not _REPO.match(s.feed.repo):
        raise _Invalid(f"expected owner/name, got {s.feed.repo!r}", key="[feed] repo")


def _check_urls(s: Settings) -> None:
    _check_url("[site] base_url", s.site.base_url)
    if s.site.app_url != "":  # "": no subscription app (no form; sending refuses)
        _check_url("[site] app_url", s.site.app_url)
    if s.translate.base_url != "":
        _check_url("[translate] base_url", s.translate.base_url)
    _check_url("[github] api_url", s.github.api_url)
    if s.subscriptions.queue_url != "":  # "": sign-ups done in the app's own process
        _check_url("[subscriptions] queue_url", s.subscriptions.queue_url)


def _check_choices(s: Settings) -> None:
    choices = {
        "[delivery] transport": (s.delivery.transport, ("outbox", "smtp", "ses")),
        "[archive] target": (s.archive.target, ("local", "s3")),
        "[translate] backend": (s.translate.backend, ("none", "openai", "aws")),
        "[inbox] source": (s.inbox.source, ("local", "s3")),
        "[store] backend": (s.store.backend, ("sqlite", "dynamodb")),
    }
    for key, (value, allowed) in choices.items():
        if value not in allowed:
            raise _Invalid(f"expected one of {', '.join(allowed)}, got {value!r}", key=key)


def _check_numbers(s: Settings) -> None:
    rate = s.delivery.max_rate
    if not (math.isfinite(rate) and 0 <= rate <= MAX_RATE):  # nan compares false to all
        raise _Invalid(f"expected messages per second from 0 (as the transport allows) "
                       f"to {MAX_RATE:g}, got {rate!r}", key="[delivery] max_rate")
    for key, (low, high, what) in _RANGES.items():
        section, name = key[1:].split("] ")
        value = getattr(getattr(s, section), name)
        if not low <= value <= high:
            raise _Invalid(f"expected {low} to {high:,} ({what}), got {value}", key=key)


def _check_names(s: Settings) -> None:
    """Names the AWS and SMTP clients would otherwise refuse mid-send."""
    if not s.smtp.host or not _HOST.match(s.smtp.host):
        raise _Invalid(f"expected a host name or IP address, got {s.smtp.host!r}",
                       key="[smtp] host")
    for arn in s.ses.sns_topic_arns:
        if not re.match(r"^arn:aws[a-z-]*:sns:[a-z0-9-]+:\d{12}:[A-Za-z0-9_.-]{1,256}$", arn):
            raise _Invalid(f"expected an SNS topic ARN, got {arn!r}", key="[ses] sns_topic_arns")
    for key in ("subscribers_table", "ledger_table"):
        if not re.match(r"^[A-Za-z0-9_.-]{3,255}$", getattr(s.store, key)):
            raise _Invalid("expected a DynamoDB table name (3-255 of A-Z a-z 0-9 _ . -)",
                           key=f"[store] {key}")
    if s.inbox.source == "s3" and not s.inbox.bucket:
        raise _Invalid("needed when [inbox] source is s3", key="[inbox] bucket")


def _check_smtp(s: Settings) -> None:
    """Every ``[smtp]`` value reaches the wire, so a line break or a space is refused."""
    smtp = s.smtp
    if smtp.tls not in TLS_MODES:
        raise _Invalid('expected "starttls" (port 587), "implicit" (port 465) or "none", '
                       f"got {smtp.tls!r}", key="[smtp] tls")
    if smtp.port == IMPLICIT_TLS_PORT and smtp.tls_mode != "implicit":
        # The relay waits for a TLS hello, the client for a greeting: a hang until timeout.
        raise _Invalid(f"port {IMPLICIT_TLS_PORT} speaks TLS from the first byte: set "
                       '[smtp] tls = "implicit" (STARTTLS is for port 587)', key="[smtp] tls")
    if smtp.helo_name and not is_host_name(smtp.helo_name):
        raise _Invalid("expected the host name this machine sends as (letters, digits, "
                       f"hyphens and dots; IDNA-encode the rest), got {smtp.helo_name!r}",
                       key="[smtp] helo_name")
    if smtp.return_path:  # bare, as MAIL FROM carries it
        if any(ch.isspace() or ch in "<>" for ch in smtp.return_path):
            raise _Invalid("expected a bare address such as bounces@example.org (no name, no "
                           f"<>, no spaces), got {smtp.return_path!r}", key="[smtp] return_path")
        try:
            validate_email(smtp.return_path, check_deliverability=False)
        except EmailNotValidError as exc:
            raise _Invalid(f"expected an address such as bounces@example.org ({exc}), "
                           f"got {smtp.return_path!r}", key="[smtp] return_path") from None
    if any(ord(ch) < 0x20 or ord(ch) == 0x7F for ch in smtp.username):
        raise _Invalid("expected a login without control characters or line breaks",
                       key="[smtp] username")
    if smtp.ca_file and smtp.tls_mode == "none":
        raise _Invalid('is set but [smtp] tls is "none" (no certificate is checked): set '
                       '[smtp] tls, or remove ca_file', key="[smtp] ca_file")


def is_host_name(name: str) -> bool:
    """Whether ``name`` is an ASCII host name (or an address literal ``[192.0.2.1]``)."""
    return bool(_HOST.match(name)) and len(name) <= 253


def _check_url(key: str, url: str) -> None:
    """A URL the mail and the pages are built from, checked whole: ``http(s)://host[:port]
    [/path]`` and nothing else (a line break would split a mail header, and links are made
    by appending to it)."""
    def refuse(why: str) -> _Invalid:
        return _Invalid(f"{why}, got {url!r}", key=key)

    if any(ch.isspace() or ord(ch) < 0x20 or 0x7F <= ord(ch) < 0xA0 for ch in url):
        raise refuse("expected a URL without whitespace or control characters")
    if not url.isascii():
        raise refuse("expected an ASCII URL (IDNA- and percent-encode the rest)")
    try:
        parts = urlsplit(url)
        port = parts.port  # ValueError when not a number in 0-65535
    except ValueError:
        raise refuse("expected an http(s) URL with a valid host and port") from None
    if parts.scheme not in ("http", "https") or not url.startswith(parts.scheme + "://"):
        raise refuse("expected an http(s) URL (http:// or https://, lower case)")
    if "@" in parts.netloc:
        raise refuse("expected a URL without user info (user@)")
    if not parts.hostname or not _HOST.match(parts.netloc.rsplit(":", 1)[0]
                                             if port is not None else parts.netloc):
        raise refuse("expected an http(s) URL with a host name")
    if port == 0 or parts.netloc.endswith(":"):
        raise refuse("expected a port from 1 to 65535")
    if parts.query or parts.fragment or "?" in url or "#" in url:
        raise refuse("expected a URL without a query or fragment")
