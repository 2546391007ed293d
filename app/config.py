"""The one settings object, read from TRACELORE_* environment variables at the edge."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal, NamedTuple

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from app.resources import resource_dir

DEFAULT_SIGNATURES = resource_dir("signatures")


def _user_cache() -> Path:
    """The XDG cache directory of the user (~/.cache unless XDG_CACHE_HOME says otherwise)."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "tracelore"


ENV_PREFIX = "TRACELORE_"


def usable_cores() -> int:
    """The CPU cores this process may run on (its affinity, not the machine's count)."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return max(1, cores)


class Threads(NamedTuple):
    """How many threads do what: the one policy for the service and the CLI."""

    diagnoses: int  # diagnoses that run at once, each in a worker thread of its own (they hold the GIL)
    scan: int  # threads that scan one large log at once (RE2 and numpy run without the GIL)


def thread_policy(settings: Settings, *, diagnoses: int | None = None) -> Threads:
    """The threads of a process: `diagnoses` at once (the CLI runs one), else one per core, at most max_in_flight.

    The cores are shared out: each running diagnosis scans with the cores left to it, at least
    two (a scan thread also waits on reading) and at most eight (a chunk each in flight).
    """
    cores = usable_cores()
    at_once = diagnoses or settings.diagnosis_threads or min(settings.max_in_flight, cores)
    return Threads(diagnoses=at_once, scan=settings.scan_threads or min(8, max(2, cores // at_once)))


def is_loopback(host: str) -> bool:
    """Whether an address (or `localhost`) is this machine's own, reachable from nowhere else."""
    if host == "localhost":
        return True
    import ipaddress  # here: only a server's settings ask, not a one-shot command's

    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


class Settings(BaseModel):
    """Service and CLI settings, each documented in docs/reference/settings.md (generated from here).

    Each field is read from TRACELORE_<NAME> unless given as an argument; pydantic parses
    the strings ("true", "8000", paths). A plain model: pydantic-settings would add a
    tenth of a second to every command's start-up.
    """

    model_config = ConfigDict(extra="ignore", frozen=True)

    signatures_dir: Path = Field(DEFAULT_SIGNATURES, description="folder of signature YAML files")
    data_dir: Path = Field(Path("data"), description="where the default SQLite database lives")
    cache_dir: Path | None = Field(
        default_factory=_user_cache, description="where parsed signature files are cached; empty: no cache"
    )
    database_url: str = Field("", description="SQLAlchemy URL; empty means SQLite in data_dir")
    host: str = Field("127.0.0.1", description="address `tracelore serve` binds")
    local: bool = Field(
        False,
        description="single-user mode for your own machine (`make serve`): requests from this machine have no daily"
        " allowance and no sign-in; only with a loopback host and no trusted proxy",
    )
    port: int = Field(8000, ge=0, le=65535, description="port `tracelore serve` binds")
    workers: int = Field(1, ge=1, le=64, description="uvicorn worker processes")
    base_url: str = Field("", description="public URL of the service, for permalinks")
    max_upload_bytes: int = Field(50 << 20, ge=1024, description="largest log accepted, after decompression")
    max_in_flight: int = Field(4, ge=1, description="diagnoses admitted at once per process; more wait, then get 503")
    diagnosis_threads: int = Field(
        0, ge=0, le=64, description="of those admitted, diagnoses that run at once per process; 0: one per core"
    )
    scan_threads: int = Field(
        0, ge=0, le=64, description="threads that scan one large log; 0: the cores per running diagnosis, 2 to 8"
    )
    queue_seconds: float = Field(
        5, ge=0, le=300, description="how long a diagnosis waits for a free slot before it gets 503; 0: no wait"
    )
    retry_after: int = Field(5, ge=1, description="seconds a client is told to wait after a 503")
    body_seconds: float = Field(
        120, gt=0, le=3600, description="how long a request's body may take to arrive; a slower one gets 408"
    )
    store_log: bool = Field(False, description="keep the whole log, not only the evidence windows")
    context_lines: int = Field(5, ge=0, le=50, description="log lines kept before and after each evidence line")
    retention_days: int = Field(30, ge=0, description="days a stored diagnosis is kept; 0 keeps it forever")
    stats_window_days: int = Field(
        30, ge=1, le=366, description="days of stored diagnoses an entry page's statistics count"
    )
    stats_min_count: int = Field(
        5,
        ge=1,
        description="fewest diagnoses a statistic on an entry page is shown for (no single upload identifiable)",
    )
    learn_every: int = Field(
        3600, ge=10, description="seconds between recomputing entry statistics and unknown clusters"
    )
    redact_network: bool = Field(True, description="also redact IP addresses and internal host names in logs")
    forwarded_allow_ips: str = Field(
        "", description="proxies whose X-Forwarded-* headers `tracelore serve` trusts (comma list or *); empty: none"
    )
    secret_key: str = Field(
        "", description="signs sessions and hashes client addresses; empty: one is generated and kept in the database"
    )
    previous_secret_keys: tuple[str, ...] = Field(
        (), description="keys that signed before secret_key, still accepted (comma list, newest first)"
    )
    quota_anonymous: int = Field(3, ge=0, description="diagnoses a day per client address without an account")
    quota_free: int = Field(10, ge=0, description="diagnoses a day per signed-in account")
    quota_verified: int = Field(50, ge=0, description="diagnoses a day per account whose e-mail is verified")
    quota_pro: int = Field(5000, ge=0, description="diagnoses a day per pro account (granted by an admin)")
    max_log_anonymous: int = Field(10 << 20, ge=1024, description="largest log without an account")
    max_log_free: int = Field(25 << 20, ge=1024, description="largest log of a signed-in account")
    max_log_verified: int = Field(50 << 20, ge=1024, description="largest log of a verified account")
    max_log_pro: int = Field(200 << 20, ge=1024, description="largest log of a pro account")
    metrics_token: str = Field(
        "", description="bearer token /metrics requires (Authorization: Bearer ...); empty: /metrics is refused"
    )
    smtp_host: str = Field("", description="SMTP server for sign-in links; empty: links are written to the log")
    smtp_port: int = Field(587, ge=1, le=65535, description="SMTP port")
    smtp_tls: Literal["starttls", "tls", "none"] = Field("starttls", description="SMTP transport security")
    smtp_username: str = Field("", description="SMTP user name; empty: no login")
    smtp_password: str = Field("", description="SMTP password")
    mail_from: str = Field("Tracelore <tracelore@localhost>", description="From: of sign-in e-mails")
    sign_in_mail_per_client: int = Field(
        10, ge=1, description="sign-in e-mails one client address may ask for in a UTC hour"
    )
    sign_in_mail_per_hour: int = Field(500, ge=1, description="sign-in e-mails the whole service sends in a UTC hour")
    login_link_minutes: int = Field(15, ge=1, le=1440, description="how long a sign-in link works")
    session_days: int = Field(30, ge=1, le=365, description="how long a sign-in lasts")

    @model_validator(mode="before")
    @classmethod
    def _from_environment(cls, data: object) -> object:
        if not isinstance(data, dict):
            return data
        names = {f"{ENV_PREFIX}{name.upper()}": name for name in cls.model_fields}
        env = {names[key]: value for key, value in os.environ.items() if key in names}
        return {**env, **data}

    @field_validator("cache_dir", mode="before")
    @classmethod
    def _no_cache(cls, value: object) -> object:
        return None if value == "" else value

    @field_validator("previous_secret_keys", mode="before")
    @classmethod
    def _key_list(cls, value: object) -> object:
        return tuple(key.strip() for key in value.split(",") if key.strip()) if isinstance(value, str) else value

    @field_validator("database_url")
    @classmethod
    def _normalise_url(cls, value: str) -> str:
        # Platform URLs say postgres://; SQLAlchemy wants a driver name.
        for prefix in ("postgres://", "postgresql://"):
            if value.startswith(prefix):
                return "postgresql+psycopg://" + value[len(prefix) :]
        return value

    @model_validator(mode="after")
    def _local_stays_local(self) -> Settings:
        # A deployment must not lose its allowances by accident: local mode never listens beyond
        # this machine, and never behind a proxy, whose requests would all come from loopback.
        if self.local and not is_loopback(self.host):
            raise ValueError(
                f"local mode serves this machine only, but the host is {self.host!r}: bind 127.0.0.1"
                " (TRACELORE_HOST) or turn local mode off (TRACELORE_LOCAL=0) for a shared server"
            )
        if self.local and self.forwarded_allow_ips:
            raise ValueError(
                "local mode cannot trust a proxy (TRACELORE_FORWARDED_ALLOW_IPS): behind one, every request"
                " would come from this machine; turn local mode off (TRACELORE_LOCAL=0) for a proxied server"
            )
        return self

    @property
    def effective_database_url(self) -> str:
        """The configured URL, or SQLite in the data directory."""
        return self.database_url or f"sqlite:///{self.data_dir.resolve() / 'tracelore.sqlite'}"
