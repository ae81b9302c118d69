"""Settings: read once from ``newsletter.toml``, overridden by ``NEWSLETTER_<SECTION>_<KEY>``.

The result is a frozen :class:`Settings` handed explicitly to every stage. Each key is declared
once, as a field: its name, type and default, and the rule its value keeps (:func:`setting`);
loading, the overrides and validation all read the fields. Relative paths are taken from the
configuration file's folder, so a job behaves the same whatever its working directory. Secrets
come from the environment only: one found in the file is refused.
"""

from __future__ import annotations

import contextlib
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
from subscribers.tokens import MIN_SECRET_LENGTH

#: Secrets someone might put in the file, and the variable each really comes from (two of
#: them look like overrides, and are not refused as misspelt ones).
_SECRET_KEYS = {
    ("smtp", "password"): "NEWSLETTER_SMTP_PASSWORD",
    ("translate", "api_key"): "NEWSLETTER_TRANSLATE_API_KEY",
    ("github", "token"): "GITHUB_TOKEN",
    ("delivery", "secret"): "NEWSLETTER_SECRET",
}
#: A host name as it may appear in a URL of ours: ASCII labels (IDNA-encode the others),
#: or an IPv6 literal.
_HOST = re.compile(r"^(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.)*"
                   r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?\Z|^\[[0-9A-Fa-f:.]+\]\Z")
#: Messages per second no transport of ours reaches: above it, a typo.
MAX_RATE = 10_000.0
#: The port of SMTP over TLS from the first byte (RFC 8314 "submissions").
IMPLICIT_TLS_PORT = 465

#: A rule one setting's value must keep: it raises ValueError saying what was expected.
Check = Callable[[Any], None]


def setting(default: Any, check: Check | None = None) -> Any:
    """A field's default and the rule its value keeps: the one place a key is declared."""
    return field(default=default, metadata={"check": check} if check else {})


def _rule(ok: Callable[[Any], Any], expected: str) -> Check:
    """A check from a test and what it expected (``{value!r}`` in it: the value given)."""
    def check(value: Any) -> None:
        if not ok(value):
            raise ValueError(expected.format(value=value))
    return check


def _one_of(*allowed: str) -> Check:
    return _rule(allowed.__contains__, f"expected one of {', '.join(allowed)}, got {{value!r}}")


def _between(low: int, high: int, what: str) -> Check:
    """Sane bounds of a number: a value beyond them is a typo, not a policy (nan is too)."""
    return _rule(lambda value: low <= value <= high,
                 f"expected {low} to {high:,} ({what}), got {{value}}")


def _url_or_empty(url: str) -> None:
    """"" turns the feature off (no subscription app, no queue, no translation server)."""
    if url:
        _check_url(url)


def _check_timezone(name: str) -> None:
    try:
        pendulum.timezone(name)
    except Exception:  # pendulum raises several types for an unknown zone name
        raise ValueError(f"unknown timezone {name!r}") from None


def _check_first_week(week: str) -> None:
    if week:
        try:
            iso_monday(week)
        except ValueError as exc:
            raise ValueError(f"{exc}, got {week!r}") from None


def _check_return_path(address: str) -> None:
    if not address:
        return
    if any(ch.isspace() or ch in "<>" for ch in address):  # bare, as MAIL FROM carries it
        raise ValueError("expected a bare address such as bounces@example.org (no name, no "
                         f"<>, no spaces), got {address!r}")
    try:
        validate_email(address, check_deliverability=False)
    except EmailNotValidError as exc:
        raise ValueError(f"expected an address such as bounces@example.org ({exc}), "
                         f"got {address!r}") from None


def _check_arns(arns: tuple[str, ...]) -> None:
    for arn in arns:
        if not re.match(r"^arn:aws[a-z-]*:sns:[a-z0-9-]+:\d{12}:[A-Za-z0-9_.-]{1,256}$", arn):
            raise ValueError(f"expected an SNS topic ARN, got {arn!r}")


_REPO = _rule(re.compile(r"^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$").match,
              "expected owner/name, got {value!r}")
_SIZE_BUDGET = _rule(lambda kb: 1 <= kb <= 100,
                     "must be between 1 and 100 (Gmail clips messages near 102 KB)")
_RATE = _rule(lambda rate: math.isfinite(rate) and 0 <= rate <= MAX_RATE,
              "expected messages per second from 0 (as the transport allows) "
              f"to {MAX_RATE:g}, got {{value!r}}")
_TABLE = _rule(re.compile(r"^[A-Za-z0-9_.-]{3,255}$").match,
               "expected a DynamoDB table name (3-255 of A-Z a-z 0-9 _ . -)")
# Every [smtp] value reaches the wire, so a line break or a space is refused.
_SMTP_HOST = _rule(_HOST.match, "expected a host name or IP address, got {value!r}")
_TLS = _rule(("", "starttls", "implicit", "none").__contains__,  # "": follows starttls
             'expected "starttls" (port 587), "implicit" (port 465) or "none", got {value!r}')
_HELO_NAME = _rule(lambda name: not name or is_host_name(name),
                   "expected the host name this machine sends as (letters, digits, hyphens "
                   "and dots; IDNA-encode the rest), got {value!r}")
_LOGIN = _rule(lambda login: not any(ord(ch) < 0x20 or ord(ch) == 0x7F for ch in login),
               "expected a login without control characters or line breaks")


def is_host_name(name: str) -> bool:
    """Whether ``name`` is an ASCII host name (or an address literal ``[192.0.2.1]``)."""
    return bool(_HOST.match(name)) and len(name) <= 253


def _check_url(url: str) -> None:
    """A URL the mail and the pages are built from, checked whole: ``http(s)://host[:port]
    [/path]`` and nothing else (a line break would split a mail header, and links are made
    by appending to it)."""
    def refuse(why: str) -> ValueError:
        return ValueError(f"{why}, got {url!r}")

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
    if port == 0:
        raise refuse("expected a port from 1 to 65535")
    if parts.query or parts.fragment or "?" in url or "#" in url:
        raise refuse("expected a URL without a query or fragment")


@dataclass(frozen=True)
class FeedSettings:
    #: Feed files or http(s) URLs merged into one issue.
    urls: tuple[str, ...] = ()
    #: ``owner/name`` of the repository whose PRs are reviewed; other repos are skipped.
    repo: str = setting("vllm-project/vllm", _REPO)


@dataclass(frozen=True)
class IssueSettings:
    #: The timezone whose Monday 00:00 starts a week.
    timezone: str = setting("Asia/Shanghai", _check_timezone)
    #: Each email's HTML stays within this many KB (1 KB = 1,000 bytes; never above 100).
    size_budget_kb: int = setting(90, _SIZE_BUDGET)
    #: Whether publish and send refuse an issue the editor has not approved.
    require_approval: bool = False
    #: The ISO week of issue No. 1 (``2026-W48``); every issue's number counts weeks from
    #: it. "": from the first week the archive holds (the week being built when it holds
    #: none), so a fresh archive's first issue is No. 1.
    first_week: str = setting("", _check_first_week)
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
    base_url: str = setting("http://127.0.0.1:8000", _check_url)
    #: Where the subscription app is served (unsubscribe, preferences); "" when there is
    #: none (the archive then shows no subscribe form, and sending refuses).
    app_url: str = setting("http://127.0.0.1:8001", _url_or_empty)


@dataclass(frozen=True)
class DeliverySettings:
    transport: str = setting("outbox", _one_of("outbox", "smtp", "ses"))
    from_: str = "vLLM PR Weekly <weekly@example.org>"
    reply_to: str = ""
    #: Messages per second; 0 means "as the transport allows" (SES: the account's rate).
    max_rate: float = setting(0.0, _RATE)
    concurrency: int = setting(4, _between(1, 256, "messages in flight at once"))
    unsubscribe_mailto: str = ""
    #: Who sends the issue, for every footer ("Sent by …"); empty: the ``from`` address.
    publisher: str = ""
    #: The sender's postal address (CAN-SPAM), shown in every footer when set.
    postal_address: str = ""
    #: Seconds the end of a run keeps retrying the messages a relay refused for now; what is
    #: still refused then exits 4, for the next run. 0: no rounds after the first pass.
    retry_seconds: float = setting(
        600.0, _between(0, 86_400, "seconds of retries after the first pass"))
    #: Send a part as 8bit data where that is the smallest: a mostly-Chinese part weighs its
    #: own size instead of 1.37 times it in base64. An SMTP relay must announce 8BITMIME.
    #: The build fits the budget to it: change it, then build again.
    eight_bit: bool = True


@dataclass(frozen=True)
class SmtpSettings:
    host: str = setting("127.0.0.1", _SMTP_HOST)
    port: int = setting(587, _between(1, 65_535, "a TCP port"))
    #: The older switch for :attr:`tls`: true is ``starttls``, false ``none``.
    starttls: bool = True
    username: str = setting("", _LOGIN)
    #: ``starttls`` (port 587: plain, then upgraded), ``implicit`` (port 465: TLS from the
    #: first byte) or ``none`` (a relay on a trusted network); "" follows ``starttls``.
    tls: str = setting("", _TLS)
    #: A PEM file of the CA(s) to trust for the relay's certificate (a private CA); ""
    #: trusts the system's store.
    ca_file: str = ""
    #: The name given in EHLO; "" is the domain of ``[delivery] from``.
    helo_name: str = setting("", _HELO_NAME)
    #: The envelope sender (``MAIL FROM``), where bounces go (point it at the address
    #: ``inbox process`` reads); "" is the ``[delivery] from`` address.
    return_path: str = setting("", _check_return_path)
    #: Connections open at once to the relay, at most; 0: one per sending thread. Set it to
    #: the relay's own limit per client when that is lower.
    max_connections: int = setting(
        0, _between(0, 256, "connections at once; 0: one per sending thread"))

    @property
    def tls_mode(self) -> str:
        """:attr:`tls` when set, else what the older ``starttls`` switch says."""
        return self.tls or ("starttls" if self.starttls else "none")


@dataclass(frozen=True)
class SesSettings:
    configuration_set: str = ""
    #: The only SNS topics ``POST /webhooks/ses`` accepts (any AWS account can sign a message
    #: for a topic of its own); empty turns the webhook off.
    sns_topic_arns: tuple[str, ...] = setting((), _check_arns)


@dataclass(frozen=True)
class StoreSettings:
    #: ``sqlite`` (a file under ``[paths] data_dir``: one machine) or ``dynamodb``.
    backend: str = setting("sqlite", _one_of("sqlite", "dynamodb"))
    #: The DynamoDB tables (``backend = "dynamodb"``).
    subscribers_table: str = setting("vllm-pr-weekly-subscribers", _TABLE)
    ledger_table: str = setting("vllm-pr-weekly-ledger", _TABLE)


@dataclass(frozen=True)
class SubscriptionSettings:
    confirm_days: int = setting(7, _between(1, 30, "days a confirmation link works"))
    #: Transient bounces in a row that make an address ``bounced``.
    transient_bounce_limit: int = setting(3, _between(1, 20, "transient bounces in a row"))
    address_per_day: int = setting(
        3, _between(1, 100, "confirmation mails per address per day"))
    #: Sign-up requests one client address can make per hour (then 429).
    client_per_hour: int = setting(20, _between(1, 10_000, "sign-ups per client per hour"))
    #: Proxies (comma-separated IPs, or "*") whose X-Forwarded-For / X-Forwarded-Proto are
    #: believed: CloudFront or a load balancer in front of ``newsletter serve``.
    forwarded_allow_ips: str = "127.0.0.1"
    #: An SQS queue the sign-ups go to, drained by deploy/'s Lambda function, so the answer
    #: never waits for the address's state; empty: done in this process.
    queue_url: str = setting("", _url_or_empty)


@dataclass(frozen=True)
class InboxSettings:
    #: Where SES's receipt rule stores inbound mail: ``local`` (a folder) or ``s3``.
    source: str = setting("local", _one_of("local", "s3"))
    dir: Path = Path("data/inbox")
    bucket: str = ""
    prefix: str = "inbound/"


@dataclass(frozen=True)
class ArchiveSettings:
    target: str = setting("local", _one_of("local", "s3"))
    dir: Path = Path("build/site")
    bucket: str = ""
    prefix: str = ""


@dataclass(frozen=True)
class TranslateSettings:
    backend: str = setting("none", _one_of("none", "openai", "aws"))
    base_url: str = setting("", _url_or_empty)
    model: str = ""


@dataclass(frozen=True)
class GithubSettings:
    enabled: bool = False
    api_url: str = setting("https://api.github.com", _check_url)


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
_SECTIONS: dict[str, type] = {f.name: type(getattr(Settings(), f.name))
                              for f in fields(Settings) if f.name not in ("base_dir", "source")}


def _key_name(field_name: str) -> str:
    return field_name.rstrip("_")


def _override(section: str, key: str) -> str:
    return f"NEWSLETTER_{section.upper()}_{key.upper()}"


_OVERRIDES = frozenset(_override(section, _key_name(f.name))
                       for section, cls in _SECTIONS.items() for f in fields(cls))


def load(path: Path | None, environ: Mapping[str, str], *, cwd: Path | None = None) -> Settings:
    """Read, merge and validate the settings: ``path`` None is ``newsletter.toml`` in the
    working folder if there is one, else the built-in defaults."""
    cwd = cwd or Path.cwd()
    if path is None and (cwd / "newsletter.toml").is_file():
        path = cwd / "newsletter.toml"
    raw: dict[str, Any] = {}
    if path is not None:
        try:
            raw = tomllib.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise ConfigError(f"no such file: {path}") from None
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(f"cannot read {path}: {exc}") from exc
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"{path} is not valid TOML: {exc}") from exc
    if unknown := sorted(raw.keys() - _SECTIONS.keys()):
        raise ConfigError(f"unknown section(s) {', '.join(unknown)}; known: {', '.join(_SECTIONS)}")
    sections = {name: _build_section(name, cls, raw.get(name, {}), environ)
                for name, cls in _SECTIONS.items()}
    _check_environment(environ)
    source = path.resolve() if path is not None else None
    settings = Settings(**sections, base_dir=source.parent if source else cwd.resolve(),
                        source=source)
    _validate(settings, environ)
    return settings


def _build_section(name: str, cls: type, given: Any, environ: Mapping[str, str]) -> Any:
    if not isinstance(given, dict):
        raise ConfigError("must be a table", key=f"[{name}]")
    hints = get_type_hints(cls)
    by_key = {_key_name(f.name): f.name for f in fields(cls)}
    values: dict[str, Any] = {}
    for key, value in given.items():
        if (name, key) in _SECRET_KEYS:
            raise ConfigError(f"secrets are read from the environment only "
                              f"({_SECRET_KEYS[(name, key)]})", key=f"[{name}] {key}")
        if key not in by_key:
            raise ConfigError(f"unknown key; known: {', '.join(by_key)}", key=f"[{name}] {key}")
        values[by_key[key]] = _coerce(value, hints[by_key[key]], f"[{name}] {key}")
    for key, attr in by_key.items():
        if (env := _override(name, key)) in environ:
            values[attr] = _coerce(environ[env], hints[attr], env, from_env=True)
    return cls(**values)


def _check_environment(environ: Mapping[str, str]) -> None:
    """Refuse a misspelt override rather than ignore it, and a signing secret too short to
    be one (here, so every command says so, not only the send that would sign with it)."""
    for name in ("NEWSLETTER_SECRET", "NEWSLETTER_SECRET_PREVIOUS"):  # the latter: a list
        value = environ.get(name, "")
        secrets = value.split(",") if name == "NEWSLETTER_SECRET_PREVIOUS" else [value]
        if any(0 < len(secret.strip().encode("utf-8")) < MIN_SECRET_LENGTH for secret in secrets):
            raise ConfigError(f"too short: use at least {MIN_SECRET_LENGTH} random bytes "
                              "(e.g. python -c \"import secrets; "
                              "print(secrets.token_urlsafe(32))\")", key=name)
    prefixes = tuple(_override(section, "") for section in _SECTIONS)
    for env in environ:
        if (env.startswith(prefixes) and env not in _OVERRIDES
                and env not in _SECRET_KEYS.values()):
            raise ConfigError("unknown override (misspelt?)", key=env)


_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}
_LIST = tuple[str, ...]

#: Each type a setting may declare: whether a value is one, and what was expected if not.
_TYPES: dict[Any, tuple[Callable[[Any], bool], str]] = {
    bool: (lambda value: isinstance(value, bool), "expected true or false"),
    # A TOML true is an int to Python, not a number to a reader.
    int: (lambda value: isinstance(value, int) and not isinstance(value, bool),
          "expected a whole number"),
    float: (lambda value: isinstance(value, int | float) and not isinstance(value, bool),
            "expected a number"),
    str: (lambda value: isinstance(value, str), "expected a string"),
    Path: (lambda value: isinstance(value, str) and value != "", "expected a path"),
    _LIST: (lambda value: isinstance(value, list) and all(isinstance(v, str) for v in value),
            "expected a list of strings"),
}


def _coerce(value: Any, hint: Any, key: str, *, from_env: bool = False) -> Any:
    """``value`` (from the file, or an override's text) as the declared type."""
    given = _from_env(value, hint) if from_env else value
    if hint == _LIST and isinstance(given, str):
        given = [given]  # one string is a list of one
    accepts, expected = _TYPES[hint]
    if not accepts(given):
        raise ConfigError(f"{expected} (got {value!r})", key=key)
    return hint(given)  # tuple[str, ...](a_list) is a tuple too


def _from_env(text: str, hint: Any) -> Any:
    """An override's text as the file's value it stands for: a comma-separated list, a number,
    or a word for true or false; left as text when it is none (refused by :func:`_coerce`)."""
    if hint == _LIST:
        return [v.strip() for v in text.split(",") if v.strip()]
    if hint is bool and text.strip().lower() in _TRUE | _FALSE:
        return text.strip().lower() in _TRUE
    if hint in (int, float):
        with contextlib.suppress(ValueError):
            return hint(text)
    return text


def _validate(s: Settings, environ: Mapping[str, str]) -> None:
    """Each field's rule, then the rules across fields; the first broken one is reported,
    named as the operator set it: the file's key, or the variable that overrode it."""
    def invalid(message: str, section: str, key: str) -> ConfigError:
        name, env = f"[{section}] {key}", _override(section, key)
        return ConfigError(message, key=f"{env} ({name})" if env in environ else name)

    for section in _SECTIONS:
        conf = getattr(s, section)
        for f in fields(conf):
            if check := f.metadata.get("check"):
                try:
                    check(getattr(conf, f.name))
                except ValueError as exc:
                    raise invalid(str(exc), section, _key_name(f.name)) from None
    smtp = s.smtp
    if smtp.port == IMPLICIT_TLS_PORT and smtp.tls_mode != "implicit":
        # The relay waits for a TLS hello, the client for a greeting: a hang until timeout.
        raise invalid(f"port {IMPLICIT_TLS_PORT} speaks TLS from the first byte: set "
                      '[smtp] tls = "implicit" (STARTTLS is for port 587)', "smtp", "tls")
    if smtp.ca_file and smtp.tls_mode == "none":
        raise invalid('is set but [smtp] tls is "none" (no certificate is checked): set '
                      "[smtp] tls, or remove ca_file", "smtp", "ca_file")
    if s.inbox.source == "s3" and not s.inbox.bucket:
        raise invalid("needed when [inbox] source is s3", "inbox", "bucket")
